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
create materialized view v_intervals as select id, ts + interval '1' day as tomorrow, ts - interval '2' hour as earlier
  from orders;
create view v_intervals_count as select count(*) as n from v_intervals;
