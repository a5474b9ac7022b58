create table t (id bigint) with ('materialized' = 'true', 'connectors' = '[{"transport": {"name": "file_input", "config": {"path": "/data/a"}}, "format": {"name": "json"}}, {"transport": {"name": "file_input", "config": {"path": "/data/b"}}, "format": {"name": "json"}}]');
create view v as select id from t;
