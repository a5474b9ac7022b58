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
create view v_cte as with paid as (select * from orders where status = 'paid') select customer_id, count(*) as n from paid group by customer_id;
create view v_cte_count as select count(*) as n from v_cte;
