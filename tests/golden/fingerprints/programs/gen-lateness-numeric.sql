create table events (k int, seq bigint lateness 10, v double) with ('append_only' = 'true');
create view per_k as select k, count(*) as n from events group by k;
