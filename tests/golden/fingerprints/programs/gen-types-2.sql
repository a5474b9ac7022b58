create table t (
  a varchar,
  b varchar(255),
  c char(10),
  d string,
  e text
);
create view v as select * from t;
