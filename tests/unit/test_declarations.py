"""Declarations a user gets wrong that Spindle read without a word, or refused only after
approval: a named primary key left out, a column without a type dropped with every input
record's field, a key naming no column, a name that reaches out of the pipeline's folders, a
format written as a string, a typo in a HAVING, a function's unknown type, a call with another
number of arguments, a function body reading the calling view's columns, functions calling each
other in a cycle. Each is refused where it is written, with what to do."""

from __future__ import annotations

import json

import pytest

from spindle.errors import SpindleError
from spindle.program import parse_program

T = "create table t (id bigint, amount int);\n"


def test_a_named_primary_key_is_refused_and_a_checkpoints_runs_as_it_did() -> None:
    """sqlglot reads `CONSTRAINT pk PRIMARY KEY (id)` as a constraint, not the table's key: the
    table was append-only without a word. Reading it as the key now would turn a running
    pipeline's table into one that upserts, with no change planned: it is refused instead."""
    named = "create table t (id int, x int, constraint pk primary key (id));"
    program = parse_program(named)
    assert program.tables["t"].primary_key == ()  # as it ran
    program.refuse_unrunnable(references=False)  # a checkpoint's: it runs as it did
    error = refusal(named)
    assert (error.reason, error.details["line"], error.details["column"]) == (
        "InvalidProgram",
        1,
        43,
    )
    assert "write `PRIMARY KEY (...)`" in error.message
    for sql in [
        "create table t (id int, x int, primary key (id));",
        "create table t (id int primary key, x int);",
    ]:
        parse_program(sql).refuse_unrunnable()
        assert parse_program(sql).tables["t"].primary_key == ("id",)


KEYED = {  # what the key is and which columns are NOT NULL, names compared as Spark's are
    "the key's case": ('create table t ("Id" bigint, name varchar, primary key (id));', ("Id",)),
    "the column's case": ('create table t (id bigint, primary key ("ID"));', ("id",)),
    "quoted both": ('create table t ("Id" bigint, x int, primary key ("Id"));', ("Id",)),
    "on the column": ('create table t ("Id" bigint primary key, x int);', ("Id",)),
    "two columns": (
        'create table t ("A" int, "B" int, x int, primary key (a, "B"));',
        ("A", "B"),
    ),
}


@pytest.mark.parametrize(("sql", "key"), KEYED.values(), ids=KEYED.keys())
def test_a_key_names_its_columns_as_they_are_spelled_and_makes_them_not_null(
    sql: str, key: tuple[str, ...]
) -> None:
    """`"Id"` with `PRIMARY KEY (id)` stayed nullable, its key spelled `id`: the runtime's check
    of a key column's NULL, which compares names as spelled, passed over it."""
    program = parse_program(sql)
    program.refuse_unrunnable()
    table = program.tables["t"]
    assert table.primary_key == key
    assert tuple(c.name for c in table.columns if not c.nullable) == key


def refusal(sql: str) -> SpindleError:
    program = parse_program(sql)  # it parses: a checkpoint that holds it still reads
    with pytest.raises(SpindleError) as raised:
        program.refuse_unrunnable()
    return raised.value


FILE = {"name": "f", "transport": {"name": "file_input", "config": {"path": "/in"}}}

REFUSED = {
    "a column without a type": (
        "create table t (id bigint,\n  name);",
        "InvalidProgram",
        "Table 't': 'name' has no type, so it is no column; give it one (`name VARCHAR`)",
        (2, 3),
    ),
    "no columns": (
        "create table t ();",
        "InvalidProgram",
        "Table 't' declares no columns; declare at least one",
        (1, 14),
    ),
    "a key naming no column": (
        "create table t (id int,\n  x int, primary key (nosuch));",
        "UnknownColumn",
        "The primary key of table 't' names column 'nosuch', which the table does not "
        "declare; name one of its columns (id, x)",
        (2, 23),
    ),
    "a key naming a column twice": (
        "create table t (id int, primary key (id, id));",
        "DuplicateColumn",
        "The primary key of table 't' names column 'id' twice; name it once",
        (1, 42),
    ),
    "a name that climbs out of the state folder": (
        'create table "../../x" (id int);',
        "InvalidProgram",
        "The name '../../x' has the character '/': a table's or view's name names its folders",
        (1, 14),
    ),
    "a view's name with a backslash": (
        T + 'create view "v\\w" as select id from t;',
        "InvalidProgram",
        "The name 'v\\\\w' has the character '\\\\'",
        (2, 13),
    ),
    "a name of dots": (
        'create table ".." (id int);',
        "InvalidProgram",
        "The name '..' has no character but dots",
        (1, 14),
    ),
    "an empty name": (
        'create table "" (id int);',
        "InvalidProgram",
        "The name '' is empty: a table's or view's name names its folders",
        (1, 14),
    ),
    "an empty view name": (
        T + 'create view "" as select id from t;',
        "InvalidProgram",
        "The name '' is empty",
        (2, 13),
    ),
    "two keys on columns": (
        "create table t (id bigint primary key,\n  name varchar primary key);",
        "InvalidProgram",
        "Table 't': another PRIMARY KEY (name): a table has one primary key; list all its "
        "columns in one PRIMARY KEY (id, name) (line 2, column 3)",
        (2, 3),
    ),
    "a column's key and the table's": (
        "create table t (id bigint primary key, name varchar,\n  primary key (name));",
        "InvalidProgram",
        "Table 't': another PRIMARY KEY (name): a table has one primary key; list all its "
        "columns in one PRIMARY KEY (id, name) (line 2, column 16)",
        (2, 16),
    ),
    "two table keys": (
        'create table t (id bigint, name varchar, primary key (id),\n  primary key (name, "ID"));',
        "InvalidProgram",
        "Table 't': another PRIMARY KEY (name, ID): a table has one primary key; list all its "
        "columns in one PRIMARY KEY (id, name) (line 2, column 16)",
        (2, 16),
    ),
    "a table's qualified name": (
        "create table cat.s.t (id int);",
        "InvalidProgram",
        "The name 'cat.s.t' has a qualifier: Spindle has no schemas or catalogs; write t "
        "(line 1, column 14)",
        (1, 14),
    ),
    "a view's qualified name": (
        T + "create view s.v as select id from t;",
        "InvalidProgram",
        "The name 's.v' has a qualifier: Spindle has no schemas or catalogs; write v "
        "(line 2, column 13)",
        (2, 13),
    ),
    "a function's qualified name": (
        "create function s.f(x int) returns int as x;",
        "InvalidProgram",
        "The name 's.f' has a qualifier: Spindle has no schemas or catalogs; write f "
        "(line 1, column 17)",
        (1, 17),
    ),
    "a control character in a name": (
        'create table "a\tb" (id int);',
        "InvalidProgram",
        "The name 'a\\tb' has the character '\\t'",
        (1, 14),
    ),
    "a format written as a string": (
        "create table t (id int) with ('connectors' = '"
        + json.dumps([{**FILE, "format": "csv"}])
        + "');",
        "InvalidConnectors",
        'Connector t.f: format is "csv", which is read as JSON; write an object, like '
        '{"name": "csv"',
        (1, 14),
    ),
    "an unknown column in an aggregate of HAVING": (
        T + "create view v as select id, count(*) as n from t group by id\n"
        "  having max(nosuch) > 1;",
        "UnknownColumn",
        "View 'v' reads column 'nosuch', which none of what it reads has ('t')",
        (3, 14),
    ),
    "an unknown column in HAVING": (
        T + "create view v as select id from t group by id having amont > 1;",
        "UnknownColumn",
        "Did you mean 'amount'?",
        (2, 54),
    ),
    "a table's column name Delta cannot store": (
        'create table t (id int,\n  "my col" int);',
        "InvalidProgram",
        "Table 't': column 'my col' cannot be stored: each table and view is stored as a "
        "Delta table, whose column names cannot have a space, a tab, a newline or any of , ; "
        '{ } ( ) =. Rename it ("my_col")',
        (2, 3),
    ),
    "a view's column name Delta cannot store": (
        T + 'create view v as select id, amount * 2 as "a,b=c" from t;',
        "InvalidProgram",
        "View 'v': column 'a,b=c' cannot be stored",
        (2, 29),
    ),
    "a parameter of no SQL type": (
        T + "create function f(x bogus) returns int as x + 1;\n"
        "create view v as select f(id) as y from t;",
        "UnsupportedType",
        "Function 'f': parameter 'x' has type 'BOGUS', which is not a SQL type",
        (2, 19),
    ),
    "a result of no SQL type": (
        T + "create function f(x int) returns bogus as x;",
        "UnsupportedType",
        "Function 'f': its result has type 'BOGUS'",
        (2, 17),
    ),
    "a parameter without a type": (
        T + "create function f(x) returns int as x + 1;",
        "UnsupportedType",
        "Function 'f': parameter 'x' has no type; give it one",
        (2, 19),
    ),
    "a call with an argument too many": (
        T + "create function f(x int) returns int as x + 1;\n"
        "create view v as select f(id, amount) as y from t;",
        "WrongArgumentCount",
        "View 'v' calls 'f' with 2 arguments, and it takes 1 (x INT); pass one per parameter",
        (3, 25),
    ),
    "a call with an argument too few, the other named as the view's column": (
        T + "create function f(x int, amount int) returns int as x + amount;\n"
        "create view v as select f(id) as y from t;",
        "WrongArgumentCount",
        "calls 'f' with 1 argument, and it takes 2 (x INT, amount INT)",
        (3, 25),
    ),
    "a function's call of another": (
        T + "create function g(x int, y int) returns int as x + y;\n"
        "create function f(x int) returns int as g(x) * 2;",
        "WrongArgumentCount",
        "Function 'f' calls 'g' with 1 argument, and it takes 2",
        (3, 41),
    ),
    "a body that reads the calling view's column": (
        T + "create function f(x int) returns int as x + amount;\n"
        "create view v as select f(id) as y from t;",
        "UnknownColumn",
        "Function 'f' reads 'amount', which is none of its parameters (x)",
        (2, 45),
    ),
    "a parameter named in another case than the body reads it": (
        T + 'create function f(x int) returns int as "X" + 1;',  # replaced as written: no x
        "UnknownColumn",
        "Function 'f' reads '\"X\"', which is none of its parameters (x)",
        (2, 41),
    ),
    "a call whose field is read": (
        T + "create function f(x int, y int) returns int as x + y;\n"
        "create view v as select f(id, amount).k as y from t;",
        "UnsupportedSql",
        "View 'v' calls 'f' for a field of its result, which its body, written out in its place,",
        (3, 25),
    ),
    "a window of a function's call": (  # PARTITION BY f(id) is a plain call
        T + "create function f(x int) returns int as x + 1;\n"
        "create view v as select sum(amount) over (partition by f(id)) as s, "
        "f(id) over (partition by amount) as y from t;",
        "UnsupportedSql",
        "View 'v' calls 'f' as a window function (OVER)",
        (3, 69),
    ),
    "a window of a function's call, alone": (
        T + "create function f(x int) returns int as x + 1;\n"
        "create view v as select f(id) over (partition by amount) as y from t;",
        "UnsupportedSql",
        "View 'v' calls 'f' as a window function (OVER)",
        (3, 25),
    ),
    "a query in a function's body": (  # its columns named as parameters were replaced
        T + "create function f(id int) returns int as (select max(id) from t);",
        "UnsupportedSql",
        "Function 'f' has a query in its body: a function reads only its parameters",
        (2, 50),
    ),
    "a parameter named twice": (
        T + "create function f(p int, p int) returns int as p;",
        "DuplicateColumn",
        "Function 'f' has two parameters named 'p'; rename one",
        (2, 17),
    ),
    "calls that grow past what the runtime writes out": (
        T
        + "".join(
            f"create function f{i}(x int) returns int as f{i + 1}(x) + f{i + 1}(x + 1);\n"
            for i in range(19)
        )
        + "create function f19(x int) returns int as x;\n"
        + "create view v as select f0(id) as y from t;",
        "ProgramTooLarge",
        "View 'v': Writing out the calls of the program's functions builds more than 200,000",
        (22, 13),
    ),
    "calls nested in arguments deeper than the runtime writes out": (
        T
        + "create function f(x int) returns int as x + 1;\n"
        + "create view v as select "
        + "f(" * 65
        + "id"
        + ")" * 65
        + " as y from t;",
        "NestingTooDeep",
        "View 'v': The program's functions call each other more than 64 deep",
        (3, 13),
    ),
    "a parameter's field": (
        T + "create function f(p struct<k int>) returns int as p.k;",
        "UnsupportedSql",
        "Function 'f' reads 'p.k', a field of parameter 'p', which the runtime does not replace",
        (2, 51),
    ),
    "a function calling itself": (
        T + "create function f(x int) returns int as f(x);",
        "CyclicFunction",
        "Functions call each other in a cycle (f -> f)",
        (2, 17),
    ),
    "functions calling each other": (
        T + "create function g(x int) returns int as f(x) + 1;\n"
        "create function f(x int) returns int as g(x);",
        "CyclicFunction",
        "Functions call each other in a cycle (f -> g -> f)",
        (3, 17),
    ),
    "a DEFAULT, which a record without the column read as NULL": (
        "create table t (id int,\n  n int not null default 5);",
        "UnsupportedSql",
        "Table 't': column 'n' has `DEFAULT 5`. Spindle does not fill a default in",
        (2, 3),
    ),
    "a CHECK, which let every row in": (
        "create table t (id int check (id > 0));",
        "UnsupportedSql",
        "column 'id' has `CHECK (id > 0)`. Spindle does not enforce it: a row that fails it",
        (1, 17),
    ),
    "a table's named CHECK": (
        "create table t (id int, constraint positive check (id > 0));",
        "UnsupportedSql",
        "Table 't': the table has `CHECK (id > 0)`. Spindle does not enforce it",
        (1, 36),
    ),
    "a UNIQUE column": (
        "create table t (id int unique, x int);",
        "UnsupportedSql",
        "`UNIQUE`. Spindle does not enforce it: rows with the same value are all ingested",
        (1, 17),
    ),
    "a table's UNIQUE": (
        "create table t (id int, x int, unique (id, x));",
        "UnsupportedSql",
        "the table has `UNIQUE (id, x)`",
        (1, 40),  # at the first column it names
    ),
    "a numbered column": (
        "create table t (id int generated always as identity, x int);",
        "UnsupportedSql",
        "Spindle does not number rows: a record without the column reads as NULL",
        (1, 17),
    ),
    "a computed column": (
        "create table t (id int, twice int generated always as (id * 2));",
        "UnsupportedSql",
        "Spindle does not compute columns of tables. Remove it, and compute the value in a view",
        (1, 25),
    ),
    "a collation": (
        "create table t (id int, s varchar collate nocase);",
        "UnsupportedSql",
        "Spindle compares text as Spark does",
        (1, 25),
    ),
    "a view's call of a chain deeper than the runtime writes out": (
        T
        + "".join(f"create function f{i}(x int) returns int as f{i + 1}(x);\n" for i in range(70))
        + "create function f70(x int) returns int as x;\n"
        + "create view v as select f0(id) as y from t;",
        "NestingTooDeep",
        "View 'v': The program's functions call each other more than 64 deep",
        (73, 13),
    ),
}


@pytest.mark.parametrize(("sql", "reason", "said", "at"), REFUSED.values(), ids=REFUSED.keys())
def test_a_declaration_spindle_would_misread_is_refused_where_it_is_written(
    sql: str, reason: str, said: str, at: tuple[int, int]
) -> None:
    error = refusal(sql)
    assert (error.reason, (error.details["line"], error.details["column"])) == (reason, at)
    assert said in error.message


@pytest.mark.parametrize(
    "sql",
    [
        'create table "my table" (id int);',  # a space, a dot: folders can have them
        'create table "a.b" (id int);',
        'create table t ("größe" int, "a.b" int);',  # what Delta stores
        T + "create view v as select id, count(*) from t group by id;",  # Spark names it
        T + "create view v as select id, count(*) as n from t group by id having n > 1;",
        T + "create view v as select id from t group by id having max(amount) > 1 and id > 0;",
        T + "create view v as select id from t group by id having count(*) > "
        "(select count(*) from t as u where u.amount > 1);",
        T + "create function F(X int, y int) returns int as x + Y;\n"  # names as Spark reads them
        "create view v as select f(id, amount) as y from t;",
        T + "create function f(x float64) returns float64 as x * 2;\n"  # read as DOUBLE
        "create view v as select f(amount) as y from t;",
        T
        + "create view v as select id from t where id in ("  # no call: nothing written out
        + ", ".join(str(i) for i in range(60_000))
        + ");",
        T
        + "create function f(x int) returns int as x + 1;\n"  # 64 deep, as the runtime allows
        + "create view v as select "
        + "f(" * 64
        + "id"
        + ")" * 64
        + " as y from t;",
        "create table t (id int) with ('connectors' = '"
        + json.dumps([{**FILE, "format": "JSON"}])
        + "');",  # read as what it says
        'create table "a*b" (id int);',  # a folder can have it
        "create table n (id int default null, m int null default null);",  # what it reads as
        "create table d (id int primary key);\n"  # not enforced, as Feldera does not
        "create table t (id int not null primary key comment 'the id', d int references d(id),"
        " foreign key (d) references d(id));",
        T  # the runtime wrote out 16 calls deep at most
        + "".join(
            f"create function f{i}(x int) returns int as f{i + 1}(x) + 1;\n" for i in range(20)
        )
        + "create function f20(x int) returns int as x;\n"
        + "create view v as select f0(id) as y from t;",
    ],
)
def test_what_is_right_stays_accepted(sql: str) -> None:
    parse_program(sql).refuse_unrunnable()


@pytest.mark.parametrize(
    ("sql", "at"),
    [
        (T + "create view v as select `id` from t;", (2, 25)),
        (T + "create view v as select `id from t;", (2, 25)),  # read as a column named `
        ("create table `t` (id int);", (1, 14)),
    ],
)
def test_a_backtick_says_names_are_quoted_with_double_quotes(sql: str, at: tuple[int, int]) -> None:
    with pytest.raises(SpindleError) as raised:
        parse_program(sql).refuse_unrunnable()  # a program that parses with one ran with it
    error = raised.value
    assert (error.reason, (error.details["line"], error.details["column"])) == (
        "InvalidProgram",
        at,
    )
    assert 'write "id", not `id`' in error.message


def test_a_program_that_ran_with_two_keys_or_a_qualified_name_runs_as_it_did() -> None:
    """The keys were one key of their columns, and `s.v` was `v`: a checkpoint's program that
    has them reads so (while a program to run is refused with them)."""
    sql = (
        "create table t (id int primary key, name varchar, primary key (name));\n"
        "create view s.v as select id from t;\n"
        "create view w as select id from v;"
    )
    program = parse_program(sql)
    program.refuse_unrunnable(references=False)
    assert program.tables["t"].primary_key == ("id", "name")
    assert list(program.views) == ["v", "w"]


def test_a_view_reading_a_qualified_name_is_told_of_the_declarations_qualifier() -> None:
    """`s.w` read nothing declared: the table was named `w`. The declaration is the mistake."""
    with pytest.raises(SpindleError) as raised:
        parse_program(
            "create table s.w (id bigint);\n"
            "create view v as select id from s.w;\n"
            "create view u as select id from s.w;"
        )
    error = raised.value
    assert (error.reason, error.details["line"], error.details["column"]) == (
        "InvalidProgram",
        1,
        14,
    )
    assert error.message == (
        "The name 's.w' has a qualifier: Spindle has no schemas or catalogs; write w "
        "(line 1, column 14)"
    )
    assert "more" not in error.details  # once, not once per reader


def test_a_program_that_ran_with_a_backtick_or_an_empty_format_still_runs() -> None:
    backtick = T + "create view v as select id` from t;"  # `id AS "`"` to sqlglot, and Spark
    parse_program(backtick).refuse_unrunnable(references=False)  # a checkpoint's: as it ran
    with pytest.raises(SpindleError) as raised:
        parse_program(backtick).refuse_unrunnable()
    assert 'write "id", not `id`' in raised.value.message
    empty = [{**FILE, "format": {}}]  # read as JSON, as an absent one is
    parse_program(f"create table t (id int) with ('connectors' = '{json.dumps(empty)}');")


def test_a_function_of_no_sql_type_is_one_problem_not_one_per_view() -> None:
    sql = (
        T + "create function f(x int) returns bogus as x;\n"
        "create view v as select f(id) as y from t;\n"
        "create view w as select f(amount) as y from t;"
    )
    with pytest.raises(SpindleError) as raised:
        parse_program(sql).refuse_unrunnable()
    assert raised.value.reason == "UnsupportedType" and "more" not in raised.value.details


def test_a_checkpoints_program_with_a_constraint_spindle_does_not_apply_runs_as_it_did() -> None:
    """A DEFAULT, a CHECK or a UNIQUE was ignored without a word, and a pipeline may have run
    with one: its checkpoint's program runs as it did (the column as declared, no row refused),
    while a program to run is refused with it."""
    sql = "create table t (id int unique, n int default 5 check (n > 0), unique (id, n));"
    program = parse_program(sql)
    program.refuse_unrunnable(references=False)
    assert [(c.name, c.type) for c in program.tables["t"].columns] == [("id", "INT"), ("n", "INT")]
    with pytest.raises(SpindleError) as raised:
        program.refuse_unrunnable()
    assert raised.value.reason == "UnsupportedSql"
    assert len(raised.value.details["more"]) == 3  # all four, each where it is written
