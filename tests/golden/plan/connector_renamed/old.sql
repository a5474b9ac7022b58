create table t (id bigint) with ('materialized' = 'true', 'connectors' = '[{"name": "src", "transport": {"name": "file_input", "config": {"path": "/data/a"}}, "format": {"name": "json"}}]');
create view v as select id from t;
