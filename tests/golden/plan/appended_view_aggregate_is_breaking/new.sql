create table t (a int, b int) with ('materialized' = 'true');
create view v as select 1 as one, count(*) as n from t;
create view w as select * from v;
