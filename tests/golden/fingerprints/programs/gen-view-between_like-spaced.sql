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
create materialized view v_between_like as select id
  from customers
  where name like 'A%' and id between 1 and 100;
create view v_between_like_count as select count(*) as n from v_between_like;
