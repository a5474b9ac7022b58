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
create view v_left_join as SELECT C.ID, O.AMOUNT FROM CUSTOMERS C LEFT JOIN ORDERS O ON O.CUSTOMER_ID = C.ID;
create view v_left_join_count as select count(*) as n from v_left_join;
