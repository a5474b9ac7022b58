create table t (id bigint) with ('materialized' = 'true', 'connectors' = '[{"name": "a", "transport": {"name": "file_input", "config": {"path": "/data/a"}}, "format": {"name": "csv"}}, {"name": "b", "transport": {"name": "file_input", "config": {"path": "/data/b"}}, "format": {"name": "csv"}}]');
create view v as select id from t;
