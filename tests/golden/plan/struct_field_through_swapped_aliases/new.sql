create table t (id bigint, x int, y int) with ('materialized' = 'true');
create view v as select a.s.f as f from (select id, named_struct('f', x) as s from t) as b join (select id, named_struct('f', y) as s from t) as a on b.id = a.id;
