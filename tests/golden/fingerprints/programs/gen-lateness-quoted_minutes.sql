create table events (k int, ts timestamp lateness interval '5' minute, v double) with ('append_only' = 'true');
create view per_k as select k, count(*) as n from events group by k;
