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
create view v_filter as SELECT ID, AMOUNT * 2 AS DOUBLED FROM ORDERS WHERE STATUS = 'paid';
create view v_filter_count as select count(*) as n from v_filter;
