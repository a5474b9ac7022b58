create table t (id bigint) with ('materialized' = 'true');
create view v with ('connectors' = '[{"name": "sink", "transport": {"name": "file_output", "config": {"path": "/out/b"}}, "format": {"name": "json"}}]') as select id from t;
