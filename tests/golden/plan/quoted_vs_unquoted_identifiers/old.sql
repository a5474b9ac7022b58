create table Foo (Id int) with ('materialized' = 'true');
create view V as select ID from FOO;
