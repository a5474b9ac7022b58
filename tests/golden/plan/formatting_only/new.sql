-- the same program, reformatted
CREATE TABLE T (ID BIGINT, X INT) with ('materialized' = 'true');
create table u (
    id BIGINT,   -- key
    y VARCHAR
) with ('materialized' = 'true');
/* block comment */
CREATE VIEW v1 AS SELECT Id, X FROM t WHERE x>0;
create view V2 as
  select a.ID, COUNT(*) n
  from v1 a inner join u b on a.id = b.id
  group by a.id;
create view v3 as select N from V2;
