create table t (a int, b int) with ('materialized' = 'true');
create view v as select a, explode(sequence(1, b)) as e from t;
create view w as select * from v;
