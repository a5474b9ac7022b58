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
create view v_self_join as select a.id, b.id as other from orders a join orders b on a.customer_id = b.customer_id and a.id < b.id;
create view v_self_join_count as select count(*) as n from v_self_join;
