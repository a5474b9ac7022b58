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
create materialized view v_ctes as with a as (select id, customer_id
  from orders), b as (select id, name
  from customers) select a.id, b.name
  from a join b on a.customer_id = b.id;
create view v_ctes_count as select count(*) as n from v_ctes;
