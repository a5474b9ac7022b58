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
create view v_extract as SELECT ID, EXTRACT(YEAR FROM TS) AS Y, EXTRACT(MONTH FROM TS) AS M FROM ORDERS;
create view v_extract_count as select count(*) as n from v_extract;
