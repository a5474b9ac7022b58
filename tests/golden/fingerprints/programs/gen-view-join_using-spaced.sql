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
create materialized view v_join_using as select order_id, sku
  from items join (select id as order_id
  from orders) o using (order_id);
create view v_join_using_count as select count(*) as n from v_join_using;
