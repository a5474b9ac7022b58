create table customers (
  id bigint not null,
  name varchar,
  region varchar(32),
  primary key (id)
) with ('materialized' = 'true');
create table orders (
  id bigint not null primary key,
  customer_id bigint,
  amount decimal(10, 2),
  status varchar,
  ts timestamp
) with ('materialized' = 'true');
create table items (order_id bigint, sku varchar, qty int, price double);
create view v_casts as SELECT ID, CAST(AMOUNT AS DOUBLE) AS A, CAST(ID AS VARCHAR) AS S, CAST(TS AS DATE) AS D FROM ORDERS;
create view v_casts_count as select count(*) as n from v_casts;
