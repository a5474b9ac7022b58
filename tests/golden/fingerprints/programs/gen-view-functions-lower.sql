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
create view v_functions as select id, coalesce(name, 'unknown') as name, nullif(region, '') as region, upper(name) as up, lower(name) as low, length(name) as len from customers;
create view v_functions_count as select count(*) as n from v_functions;
