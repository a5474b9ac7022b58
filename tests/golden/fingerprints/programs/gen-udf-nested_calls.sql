create function add_one(x int) returns int as x + 1;
create function add_two(x int) returns int as add_one(add_one(x));
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
create view v as select add_two(qty) as q from items where add_one(qty) > 2;
