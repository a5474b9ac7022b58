create table t (a int);
create view v as select a from t where a > ÿþ 1;
