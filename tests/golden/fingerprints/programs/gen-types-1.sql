create table t (
  a boolean,
  b real,
  c float,
  d double
);
create view v as select * from t;
