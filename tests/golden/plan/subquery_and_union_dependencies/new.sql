create table a (k int) with ('materialized' = 'true');
create table b (k int) with ('materialized' = 'true');
create table c (k bigint) with ('materialized' = 'true');
create view v as select k from a union all select k from b where k in (select k from c);
create view w as select k from a;
