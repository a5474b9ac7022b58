create table t (id bigint, x int) with ('materialized' = 'true');
create table u (id bigint, y varchar) with ('materialized' = 'true');
create view v1 as select id, x from t where x > 0;
create view v2 as select v1.id, count(*) as n from v1 join u on v1.id = u.id group by v1.id;
create view v3 as select n from v2;
