create table t (
  a tinyint,
  b smallint,
  c int,
  d integer,
  e bigint
);
create view v as select * from t;
