create table t (id bigint) with ('materialized' = 'true', 'connectors' = '[{"name": "b", "transport": {"name": "file_input", "config": {"path": "/data/b"}}, "format": {"name": "json"}}, {"name": "c", "transport": {"name": "file_input", "config": {"path": "/data/c"}}, "format": {"name": "json"}}]');
create view v as select id from t;
