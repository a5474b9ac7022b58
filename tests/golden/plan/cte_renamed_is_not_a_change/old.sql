create table s (a int) with ('materialized' = 'true');
create view v as with c1 as (select a from s) select c1.a from c1;
