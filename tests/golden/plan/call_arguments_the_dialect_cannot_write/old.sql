-- Arguments sqlglot's default dialect does not write: each edit below is a change (the
-- canonical form carries the call's structure), though Spindle's SQL renders both sides alike.
create table t (id int, x double, s varchar) with ('materialized' = 'true');
create view sorted as select id, sort_array(array(x, id)) as xs from t;
create view any_big as select id, exists(array(x, id), v -> v > 1) as big from t;
create view formatted as select id, to_char(x, '999') as f from t;
create view kept as select id, sort_array(array(x, id), false) as xs from t;
