create table t (a int, b int) with ('materialized' = 'true');
create view v as select a, count(*) as n from t group by all;
create view w as select * from v;
