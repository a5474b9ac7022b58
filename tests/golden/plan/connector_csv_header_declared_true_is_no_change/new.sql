create table t (id bigint) with ('materialized' = 'true', 'connectors' = '[{"name": "a", "transport": {"name": "file_input", "config": {"path": "/data/a"}}, "format": {"name": "csv", "config": {"headers": true}}}, {"name": "b", "transport": {"name": "file_input", "config": {"path": "/data/b"}}, "format": {"name": "csv", "config": {"header": "false"}}}]');
create view v as select id from t;
