create table t (
  a date,
  b timestamp,
  c varbinary,
  d binary
);
create view v as select * from t;
