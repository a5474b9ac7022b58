create table t (id bigint, x int, y int) with ('materialized' = 'true');
create view v as select p.s.f as f from (select id, named_struct('f', x) as s from t) as p join (select id, named_struct('f', y) as s from t) as q on p.id = q.id;
