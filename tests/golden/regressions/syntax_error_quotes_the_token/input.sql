create table join (a int);
