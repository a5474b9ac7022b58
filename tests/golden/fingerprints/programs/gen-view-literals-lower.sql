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
create view v_literals as select id, date '2025-01-31' as d, timestamp '2025-01-31 12:00:00' as t, 1.50 as dec, 'it''s' as quote, true as yes, null as nothing from orders;
create view v_literals_count as select count(*) as n from v_literals;
