create table t (
  a decimal(38,
  10),
  b decimal(5,
  2),
  c numeric(12,
  4)
);
create view v as select * from t;
