create table keep (k int) with ('materialized' = 'true');
