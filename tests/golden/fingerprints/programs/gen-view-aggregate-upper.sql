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
create view v_aggregate as SELECT CUSTOMER_ID, COUNT(*) AS N, SUM(AMOUNT) AS TOTAL, AVG(AMOUNT) AS MEAN, MIN(TS) AS FIRST_TS, MAX(TS) AS LAST_TS FROM ORDERS GROUP BY CUSTOMER_ID;
create view v_aggregate_count as select count(*) as n from v_aggregate;
