create table s (a int) with ('materialized' = 'true');
create view v as with renamed as (select a from s) select renamed.a from renamed;
