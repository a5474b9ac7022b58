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
create view v_full_join as select c.id, o.amount from customers c full outer join orders o on o.customer_id = c.id;
create view v_full_join_count as select count(*) as n from v_full_join;
