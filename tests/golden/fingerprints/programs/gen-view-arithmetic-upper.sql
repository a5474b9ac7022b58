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
create view v_arithmetic as SELECT ID, (AMOUNT + 1) * 2 / 3 - 4 AS X, AMOUNT % 7 AS R, -AMOUNT AS NEG FROM ORDERS;
create view v_arithmetic_count as select count(*) as n from v_arithmetic;
