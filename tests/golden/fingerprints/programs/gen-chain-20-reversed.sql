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
create view v19 as select id, amount + 19 as amount from v18 where amount > 19;
create view v18 as select id, amount + 18 as amount from v17 where amount > 18;
create view v17 as select id, amount + 17 as amount from v16 where amount > 17;
create view v16 as select id, amount + 16 as amount from v15 where amount > 16;
create view v15 as select id, amount + 15 as amount from v14 where amount > 15;
create view v14 as select id, amount + 14 as amount from v13 where amount > 14;
create view v13 as select id, amount + 13 as amount from v12 where amount > 13;
create view v12 as select id, amount + 12 as amount from v11 where amount > 12;
create view v11 as select id, amount + 11 as amount from v10 where amount > 11;
create view v10 as select id, amount + 10 as amount from v9 where amount > 10;
create view v9 as select id, amount + 9 as amount from v8 where amount > 9;
create view v8 as select id, amount + 8 as amount from v7 where amount > 8;
create view v7 as select id, amount + 7 as amount from v6 where amount > 7;
create view v6 as select id, amount + 6 as amount from v5 where amount > 6;
create view v5 as select id, amount + 5 as amount from v4 where amount > 5;
create view v4 as select id, amount + 4 as amount from v3 where amount > 4;
create view v3 as select id, amount + 3 as amount from v2 where amount > 3;
create view v2 as select id, amount + 2 as amount from v1 where amount > 2;
create view v1 as select id, amount + 1 as amount from v0 where amount > 1;
create view v0 as select id, amount + 0 as amount from orders where amount > 0;
