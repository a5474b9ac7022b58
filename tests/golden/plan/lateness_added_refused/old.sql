create table ev (id bigint, ts timestamp) with ('materialized' = 'true');
create view ev_count as select count(*) as n from ev;
