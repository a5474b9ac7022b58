create table t (id bigint, x int, y int) with ('materialized' = 'true');
create view v as select a.s.f as f from (select id, named_struct('f', x) as s from t) as a join (select id, named_struct('f', y) as s from t) as b on a.id = b.id;
