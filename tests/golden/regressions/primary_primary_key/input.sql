create table t (id bigint, x int, primary primary key (id)) with ('materialized' = 'true');
