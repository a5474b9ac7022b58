create table t (id bigint) with ('materialized' = 'true', 'connectors' = '[{"name": "src", "transport": {"name": "file_input", "config": {"path": "/data/a"}}, "format": {"name": "json"}, "max_batch_size": 5000, "max_queued_records": 10, "paused": true}]');
create view v as select id from t;
