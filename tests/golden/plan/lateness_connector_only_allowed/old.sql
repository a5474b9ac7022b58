create table ev (id bigint, ts timestamp lateness interval 1 hour) with ('materialized' = 'true', 'connectors' = '[{"name": "src", "transport": {"name": "file_input", "config": {"path": "/data/a"}}, "format": {"name": "json"}}]');
create view ev_count as select count(*) as n from ev;
