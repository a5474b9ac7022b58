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
create view v_window_frame as select id, sum(amount) over (partition by customer_id order by ts rows between unbounded preceding and current row) as running from orders;
create view v_window_frame_count as select count(*) as n from v_window_frame;
