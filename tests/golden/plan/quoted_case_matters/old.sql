create table "Foo" (id int) with ('materialized' = 'true');
