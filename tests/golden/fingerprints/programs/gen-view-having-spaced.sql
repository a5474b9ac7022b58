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
create materialized view v_having as select customer_id, sum(amount) as total
  from orders group by customer_id having sum(amount) > 100;
create view v_having_count as select count(*) as n from v_having;
