create table
