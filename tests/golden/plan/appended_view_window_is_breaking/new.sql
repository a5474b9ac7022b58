create table t (a int, b int) with ('materialized' = 'true');
create view v as select a, row_number() over (partition by b order by a) as r from t;
create view w as select * from v;
