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
create view v_string_ops as select id, name || '@' || region as label, substring(name, 1, 3) as prefix, trim(name) as trimmed from customers;
create view v_string_ops_count as select count(*) as n from v_string_ops;
