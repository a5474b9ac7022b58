create table t (
  a int not null,
  "Mixed Case" varchar,
  "quoted""name" int,
  primary key (a)
);
create view v as select * from t;
