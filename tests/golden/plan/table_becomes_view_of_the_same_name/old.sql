create table src (id bigint) with ('materialized' = 'true');
create table x (id bigint) with ('materialized' = 'true');
create view w as select id from x;
