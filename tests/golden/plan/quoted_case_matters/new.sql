create table "FOO" (id int) with ('materialized' = 'true');
