create table foo (id int) with ('materialized' = 'true');
create view v as select id from foo;
create view "V2" as select id from "foo";
