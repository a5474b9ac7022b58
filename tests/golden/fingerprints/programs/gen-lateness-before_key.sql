create table events (k int, id bigint not null primary key, ts timestamp lateness interval 30 second, v double) with ('append_only' = 'true');
create view per_k as select k, count(*) as n from events group by k;
