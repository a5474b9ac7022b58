create table t (a int, b int) with ('materialized' = 'true');
create view v as select a from t;
create view w as select * from v;
