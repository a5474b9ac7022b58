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
create view v1 as select id, amount + 1 as amount from v0 where amount > 1;
create view v0 as select id, amount + 0 as amount from orders where amount > 0;
