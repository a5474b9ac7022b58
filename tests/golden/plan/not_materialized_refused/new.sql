create table t (id bigint, x int);
create table u (id bigint) with ('materialized' = 'true');
create view v as select id from t where x > 0;
create view w as select id from u;
