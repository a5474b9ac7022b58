create table src (id bigint) with ('materialized' = 'true');
create view x as select id from src;
create view w as select id from x;
