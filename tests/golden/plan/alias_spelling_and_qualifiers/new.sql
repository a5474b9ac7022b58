create table t (id int, x int) with ('materialized' = 'true');
create table u (id int) with ('materialized' = 'true');
create view v as select tt.x from t as tt inner join u as uu on tt.id = uu.id;
