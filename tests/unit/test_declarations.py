"""Declarations a user gets wrong that Spindle read without a word: a named primary key left
out, a column without a type dropped with every input record's field, a key naming no column,
a name that reaches out of the pipeline's folders, a format written as a string, a typo in a
HAVING. Each is refused where it is written, with what to do."""

from __future__ import annotations

import json

import pytest

from spindle.errors import SpindleError
from spindle.program import parse_program

T = "create table t (id bigint, amount int);\n"


def test_a_named_primary_key_keys_the_table_like_the_other_forms() -> None:
    forms = [
        "create table t (id int, x int, constraint pk primary key (id));",
        "create table t (id int, x int, primary key (id));",
        "create table t (id int primary key, x int);",
    ]
    for sql in forms:
        table = parse_program(sql).tables["t"]
        assert table.primary_key == ("id",), sql
        assert [c.nullable for c in table.columns] == [False, True], sql


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
        "Column 't.name' has no type; give it one (`name VARCHAR`)",
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
    "a key quoting another case": (
        'create table t (id int, primary key ("ID"));',
        "UnknownColumn",
        "names column 'ID', which the table does not declare",
        (1, 38),
    ),
    "a key naming a column twice": (
        "create table t (id int, primary key (id, id));",
        "DuplicateColumn",
        "The primary key of table 't' names column 'id' twice; name it once",
        (1, 42),
    ),
    "a named key naming no column": (
        "create table t (id int, constraint pk primary key (nosuch));",
        "UnknownColumn",
        "names column 'nosuch'",
        (1, 52),
    ),
    "a name that climbs out of the state folder": (
        'create table "../../x" (id int);',
        "InvalidProgram",
        "The name '../../x' has the character '/': a table's or view's name names its folders",
        (1, 14),
    ),
    "a view's name with a glob": (
        T + 'create view "v*" as select id from t;',
        "InvalidProgram",
        "The name 'v*' has the character '*'",
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
        "The name '' has no character but dots",
        (1, 14),
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
        'Connector t.f: format is "csv"; it must be an object, like {"name": "csv"',
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
        T + "create view v as select id, count(*) as n from t group by id having n > 1;",
        T + "create view v as select id from t group by id having max(amount) > 1 and id > 0;",
        T + "create view v as select id from t group by id having count(*) > "
        "(select count(*) from t as u where u.amount > 1);",
    ],
)
def test_what_is_right_stays_accepted(sql: str) -> None:
    parse_program(sql).refuse_unrunnable()
