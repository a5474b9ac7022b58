create table t (id bigint, x in t) with ('materialized' = 'true');
