create table ev (id bigint, ts timestamp lateness interval 1 hour) with ('materialized' = 'true');
create view ev_count as select count(*) as n from ev;
