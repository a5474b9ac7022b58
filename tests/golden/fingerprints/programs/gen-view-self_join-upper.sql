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
create view v_self_join as SELECT A.ID, B.ID AS OTHER FROM ORDERS A JOIN ORDERS B ON A.CUSTOMER_ID = B.CUSTOMER_ID AND A.ID < B.ID;
create view v_self_join_count as select count(*) as n from v_self_join;
