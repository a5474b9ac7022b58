create table t (a int);
create table u (a int) with ('connectors' = '[{"transport": {"name": "x"}');
