create table t (id int, x int) with ('materialized' = 'true');
create table u (id int) with ('materialized' = 'true');
create view v as select a.x from t a join u b on a.id = b.id;
