create table t (a int) with ('materialized' = 'true');
create table s (a int) with ('materialized' = 'true');
create view v as with t as (select a from s) select a from t;
