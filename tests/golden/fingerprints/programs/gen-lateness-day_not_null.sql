create table events (k int, ts timestamp not null lateness interval '1' day, v double) with ('append_only' = 'true');
create view per_k as select k, count(*) as n from events group by k;
