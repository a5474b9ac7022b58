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
create view v_aggregate as select customer_id, count(*) as n, sum(amount) as total, avg(amount) as mean, min(ts) as first_ts, max(ts) as last_ts from orders group by customer_id;
create view v_aggregate_count as select count(*) as n from v_aggregate;
