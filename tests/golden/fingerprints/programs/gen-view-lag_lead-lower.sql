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
create view v_lag_lead as select id, lag(amount, 1) over (partition by customer_id order by ts) as prev, lead(amount) over (partition by customer_id order by ts) as next from orders;
create view v_lag_lead_count as select count(*) as n from v_lag_lead;
