"""Ad-hoc inserts (`spindle local execute`), golden style: a statement and the rows it queues, or
the reason, a fragment of the message and the line and column it is refused at. Nothing is
queued from a refused statement: `parse_insert` raises before `write_batch` is called."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spindle.checkpoint.objects import open_objects
from spindle.errors import SpindleError
from spindle.local.adhoc import parse_insert, write_batch
from spindle.local.values import CONVERTERS
from spindle.program import parse_program
from spindle.program.types import STORED_TYPES

PROGRAM = parse_program(
    """
create table students (id bigint, name varchar) with ('materialized' = 'true');
create table grades (student_id bigint, class string, grade decimal(5,2), class_date date);
create table "Mixed" ("Id" int not null primary key, note varchar(3));
create table kinds (
  id bigint not null primary key, flag boolean, tiny tinyint, small smallint, i int, r real,
  d double, n decimal(5,2), big decimal(38,10), v varchar(3), c char(2), day date,
  at timestamp, t time, bin varbinary
);
create view roster as select name from students;
"""
)
KINDS = [c.name for c in PROGRAM.tables["kinds"].columns]


def kinds(**values: Any) -> dict[str, Any]:
    return {name: values.get(name) for name in KINDS}


D, TS = datetime.date, datetime.datetime

ACCEPTED: list[tuple[str, str, list[dict[str, Any]]]] = [
    (
        "insert into students values (1, 'Alice'), (2, 'Bob')",
        "students",
        [{"id": 1, "name": "Alice"}, {"id": 2, "name": "Bob"}],
    ),
    (
        "insert into grades values (1, 'algebra', 97, '2025-09-15'),\n"
        "  (2, 'physics', 89.5, DATE '2025-11-15')",
        "grades",
        [
            {
                "student_id": 1,
                "class": "algebra",
                "grade": Decimal("97.00"),
                "class_date": D(2025, 9, 15),
            },
            {
                "student_id": 2,
                "class": "physics",
                "grade": Decimal("89.50"),
                "class_date": D(2025, 11, 15),
            },
        ],
    ),
    ("insert into students (name) values ('Eve')", "students", [{"id": None, "name": "Eve"}]),
    ("insert into students values (1, 'a');", "students", [{"id": 1, "name": "a"}]),
    ("INSERT INTO Students (NAME, Id) VALUES ('a', 1)", "students", [{"id": 1, "name": "a"}]),
    (
        "-- a comment\ninsert into students /* and another */ values\n(1, 'it''s')",
        "students",
        [{"id": 1, "name": "it's"}],
    ),
    ('INSERT INTO "Mixed" ("Id") VALUES (1)', "Mixed", [{"Id": 1, "note": None}]),
    ("insert into students values (null, null)", "students", [{"id": None, "name": None}]),
    # SQL's assignment casts, where nothing is lost or invented
    (
        "insert into kinds (id, flag, tiny, small, i, r, d, n, big, v, c) values "
        "(-9223372036854775808, true, -128, 32767, '-12', 1.5, 1e300, -999.99, "
        "1234567890123456789012345678.0123456789, 'abcdef', 12),"
        "(9223372036854775807, 'FALSE', 127, -32768, 2147483647, 2, '3.25', '0.1', 1e-10, 1.50, "
        "true),"
        "(1e3, null, (5.0), -(-3), cast('7' as int), -0.5, 0, 0e5, 0, DATE '2025-01-02', '')",
        "kinds",
        [
            kinds(
                id=-(2**63),
                flag=True,
                tiny=-128,
                small=32767,
                i=-12,
                r=1.5,
                d=1e300,
                n=Decimal("-999.99"),
                big=Decimal("1234567890123456789012345678.0123456789"),
                v="abcdef",
                c="12",
            ),
            kinds(
                id=2**63 - 1,
                flag=False,
                tiny=127,
                small=-32768,
                i=2**31 - 1,
                r=2.0,
                d=3.25,
                n=Decimal("0.10"),
                big=Decimal("1E-10"),
                v="1.50",
                c="TRUE",
            ),
            kinds(
                id=1000,
                tiny=5,
                small=3,
                i=7,
                r=-0.5,
                d=0.0,
                n=Decimal("0.00"),
                big=Decimal("0E-10"),
                v="2025-01-02",
                c="",
            ),
        ],
    ),
    (
        "insert into kinds (id, day, at) values (1, '2024-02-29', '2025-01-01 10:00:00.5'),"
        " (2, date('2025-1-2'), TIMESTAMP '2025-06-30T23:59'), (3, null, DATE '2025-01-01'),"
        " (4, ' 2025-03-04 ', '2025-01-01')",
        "kinds",
        [
            kinds(id=1, day=D(2024, 2, 29), at=TS(2025, 1, 1, 10, 0, 0, 500000)),
            kinds(id=2, day=D(2025, 1, 2), at=TS(2025, 6, 30, 23, 59)),
            kinds(id=3, at=TS(2025, 1, 1)),
            kinds(id=4, day=D(2025, 3, 4), at=TS(2025, 1, 1)),
        ],
    ),
    ("insert into kinds (id, t, bin) values (1, null, null)", "kinds", [kinds(id=1)]),
]


@pytest.mark.parametrize(("sql", "table", "rows"), ACCEPTED, ids=[a[0][:40] for a in ACCEPTED])
def test_accepted(sql: str, table: str, rows: list[dict[str, Any]]) -> None:
    assert parse_insert(sql, PROGRAM) == (table, rows)


REFUSED: list[tuple[str, str, str, tuple[int, int] | None]] = [
    # a missing comma between rows: sqlglot reads the second row as column names of VALUES
    (
        "insert into students values (3, 'Carol') (4, 'Dan')",
        "InvalidInsert",
        "Row 2 `(4, 'Dan')` follows row 1 with no comma, so it would not be inserted; "
        "separate rows with commas",
        (1, 42),
    ),
    (
        "insert into students values (1, 'a'),\n  (2, 'b')\n  (3, 'c')",
        "InvalidInsert",
        "Row 3 `(3, 'c')` follows row 2 with no comma",
        (3, 3),
    ),
    ("insert into students values (1, 'a') x", "InvalidInsert", "Unexpected `x`", (1, 38)),
    (
        "insert into students values (1, 'a') as v (a, b)",
        "InvalidInsert",
        "Unexpected `v(a, b)`",
        (1, 41),
    ),
    (
        "insert into students values (1 Alice)",
        "InvalidInsert",
        "`1 Alice` reads as a value followed by the name `Alice`; separate values with commas",
        (1, 32),
    ),
    # parts of a statement that are not INSERT INTO t [(columns)] VALUES ...
    (
        "insert into students values (1, 'a');\ninsert into students values (2, 'b')",
        "UnsupportedSql",
        "Execute one statement at a time",
        (2, 1),
    ),
    (
        "insert overwrite table students values (1, 'a')",
        "UnsupportedSql",
        "without OVERWRITE",
        (1, 8),
    ),
    (
        "insert into students values (1, 'a') returning id",
        "UnsupportedSql",
        "without RETURNING",
        (1, 38),
    ),
    (
        "insert into students values (1, 'a') on conflict do nothing",
        "UnsupportedSql",
        "without ON CONFLICT",
        (1, 38),
    ),
    (
        "with x as (select 1) insert into students values (1, 'a')",
        "UnsupportedSql",
        "without WITH",
        (1, 1),
    ),
    (
        "insert or replace into students values (1, 'a')",
        "UnsupportedSql",
        "without OR REPLACE",
        (1, 8),
    ),
    ("insert into s.students values (1, 'a')", "UnsupportedSql", "name the table alone", (1, 13)),
    ("select 1", "UnsupportedSql", "Only `INSERT INTO <table> [(columns)] VALUES", (1, 1)),
    ("", "UnsupportedSql", "Only `INSERT INTO <table> [(columns)] VALUES", None),
    ("insert into students select 1, 'a'", "UnsupportedSql", "not a query", (1, 29)),
    ("insert into students values (1, 'a'", "InvalidInsert", "Syntax error: Expecting )", (1, 33)),
    ("insert into students values ('a", "InvalidInsert", "Cannot tokenize the statement", None),
    # the table and its columns
    ("insert into nobody values (1)", "UnknownRelation", "Table 'nobody' is not declared", (1, 13)),
    (
        "insert into student values (1, 'a')",
        "UnknownRelation",
        "Table 'student' is not declared in the pipeline's program (did you mean 'students'?)",
        (1, 13),
    ),
    (  # was "Table 'roster' is not declared"
        "insert into roster values ('a')",
        "UnknownRelation",
        "'roster' is a view of the pipeline's program: views are computed from its tables",
        (1, 13),
    ),
    (
        "insert into students (id, nme) values (1, 'a')",
        "InvalidInsert",
        "Table 'students' has no column 'nme'; its columns are id, name",
        (1, 27),
    ),
    (
        "insert into students (id, ID) values (1, 2)",
        "InvalidInsert",
        "Column 'ID' is listed twice",
        (1, 27),
    ),
    (
        "insert into \"Mixed\" (note) values ('x')",
        "InvalidInsert",
        "Column Id of 'Mixed' is NOT NULL and not in the column list",
        (1, 13),
    ),
    (
        'insert into "Mixed" values (1)',
        "InvalidInsert",
        "Row 1 has 1 values for 2 columns",
        (1, 28),
    ),
    (
        "insert into students values (1, 'a'),\n (2, 'b', 3)",
        "InvalidInsert",
        "Row 2 has 3 values for 2 columns of 'students' (id, name)",
        (2, 2),
    ),
    # values that are not literals
    (
        "insert into students values (1 + 2, 'a')",
        "UnsupportedSql",
        "Row 1, column id (BIGINT): `1 + 2` is not a literal",
        (1, 30),
    ),
    ("insert into students values (?, 'a')", "UnsupportedSql", "`?` is not a literal", (1, 30)),
    (
        "insert into students values (-'3', 'a')",
        "InvalidInsertValue",
        "`-'3'` negates a value that is not a number",
        (1, 30),
    ),
    # values not of their column's type: refused before anything is queued
    (
        "insert into grades values (1, 'x', 'abc', '2025-01-01')",
        "InvalidInsertValue",
        "Row 1, column grade (DECIMAL(5, 2)): `'abc'` is not a number; nothing of the statement "
        "was queued",
        (1, 36),
    ),
    (
        "insert into grades values (1, 'x', 1, '2025-01-01'),\n  (2, 'y', 2, 'notadate')",
        "InvalidInsertValue",
        "Row 2, column class_date (DATE): `'notadate'` is not a date; write 'YYYY-MM-DD'",
        (2, 15),
    ),
    (
        "insert into grades values (1, 'x', 1, '2025-02-30')",
        "InvalidInsertValue",
        "`'2025-02-30'` is not a date: day is out of range for month",
        (1, 39),
    ),
    (
        "insert into grades values (1, 'x', 1, DATE '2025-13-01')",
        "InvalidInsertValue",
        "`DATE '2025-13-01'` is not a date: month must be in 1..12",
        (1, 39),
    ),
    (
        "insert into grades values (1, 'x', 1, TIMESTAMP '2025-01-01 10:00')",
        "InvalidInsertValue",
        "is a timestamp, not a date",
        (1, 39),
    ),
    (
        "insert into students values ('one', 'x')",
        "InvalidInsertValue",
        "Row 1, column id (BIGINT): `'one'` is not a number",
        (1, 30),
    ),
    (
        "insert into grades values (1, 'x', 123456.789, '2025-01-01')",
        "InvalidInsertValue",
        "`123456.789` is out of range for DECIMAL(5, 2) (at most 3 digits before the decimal "
        "point)",
        (1, 36),
    ),
    (
        "insert into grades values (1, 'x', 1.234, '2025-01-01')",
        "InvalidInsertValue",
        "`1.234` has more than 2 digits after the decimal point",
        (1, 36),
    ),
    (
        "insert into kinds (id, tiny) values (1, 128)",
        "InvalidInsertValue",
        "`128` is out of range for TINYINT (-128 to 127)",
        (1, 41),
    ),
    (
        "insert into kinds (id, tiny) values (1, -129)",
        "InvalidInsertValue",
        "out of range for TINYINT",
        (1, 41),
    ),
    (
        "insert into kinds (id, small) values (1, 32768)",
        "InvalidInsertValue",
        "out of range for SMALLINT (-32768 to 32767)",
        (1, 42),
    ),
    (
        "insert into kinds (id, i) values (1, 2147483648)",
        "InvalidInsertValue",
        "out of range for INT",
        (1, 38),
    ),
    (
        "insert into kinds (id) values (9223372036854775808)",
        "InvalidInsertValue",
        "out of range for BIGINT",
        (1, 32),
    ),
    (
        "insert into kinds (id) values (1e999999)",
        "InvalidInsertValue",
        "out of range for BIGINT",
        (1, 32),
    ),
    (
        "insert into kinds (id) values (1.5)",
        "InvalidInsertValue",
        "`1.5` is not a whole number, which BIGINT needs",
        (1, 32),
    ),
    (
        "insert into kinds (id) values (true)",
        "InvalidInsertValue",
        "`true` is a boolean, not a number",
        (1, 32),
    ),
    (
        "insert into kinds (id, flag) values (1, 1)",
        "InvalidInsertValue",
        "`1` is not a boolean (TRUE or FALSE)",
        (1, 41),
    ),
    (
        "insert into kinds (id, flag) values (1, 'yes')",
        "InvalidInsertValue",
        "is not a boolean",
        (1, 41),
    ),
    (
        "insert into kinds (id, r) values (1, 1e400)",
        "InvalidInsertValue",
        "`1e400` is out of range for FLOAT",
        (1, 38),
    ),
    (
        "insert into kinds (id, d) values (1, 'x')",
        "InvalidInsertValue",
        "column d (DOUBLE): `'x'` is not a number",
        (1, 38),
    ),
    (
        "insert into kinds (id, big) values (1, 1e29)",
        "InvalidInsertValue",
        "out of range for DECIMAL(38, 10)",
        (1, 40),
    ),
    (
        "insert into kinds (id, at) values (1, '2025-01-01 25:00')",
        "InvalidInsertValue",
        "is not a timestamp: hour must be in 0..23",
        (1, 39),
    ),
    (
        "insert into kinds (id, at) values (1, '2025-01-01 10:00:00+02:00')",
        "InvalidInsertValue",
        "(no time zone)",
        (1, 39),
    ),
    (
        "insert into kinds (id, at) values (1, '2025-01-01 10:00:00.1234567')",
        "InvalidInsertValue",
        "is not a timestamp",
        (1, 39),
    ),
    (
        "insert into kinds (id, day) values (1, 20250101)",
        "InvalidInsertValue",
        "`20250101` is not a date",
        (1, 40),
    ),
    (
        "insert into kinds values (null, null, null, null, null, null, null, null, null, null, "
        "null, null, null, null, null)",
        "InvalidInsertValue",
        "Row 1, column id (BIGINT NOT NULL): `null` is NULL, which a NOT NULL column cannot hold",
        (1, 27),
    ),
    (
        "insert into kinds (id, t) values (1, '10:00')",
        "UnsupportedSql",
        "column t (TIME): `'10:00'` cannot be inserted ad hoc: `spindle local execute` writes no "
        "TIME values",
        (1, 38),
    ),
    (
        "insert into kinds (id, bin) values (1, 'ab')",
        "UnsupportedSql",
        "writes no VARBINARY values",
        (1, 40),
    ),
    (
        "insert into kinds (id, v) values (1, TIME '10:00')",
        "UnsupportedSql",
        "is a TIME value",
        (1, 38),
    ),
]


@pytest.mark.parametrize(
    ("sql", "reason", "fragment", "where"), REFUSED, ids=[r[0][:48] for r in REFUSED]
)
def test_refused(sql: str, reason: str, fragment: str, where: tuple[int, int] | None) -> None:
    with pytest.raises(SpindleError) as caught:
        parse_insert(sql, PROGRAM)
    error = caught.value
    assert (error.reason, fragment in error.message) == (reason, True), error.message
    if where is None:
        assert "line" not in error.details
    else:
        line, column = where
        assert (error.details["line"], error.details["column"]) == where, error.message
        assert error.message.endswith(f"(line {line}, column {column})")


def test_a_refused_value_is_named_in_the_details() -> None:
    with pytest.raises(SpindleError) as caught:
        parse_insert("insert into grades values (1, 'x', 'abc', '2025-01-01')", PROGRAM)
    assert caught.value.details == {
        "line": 1,
        "column": 36,
        "row": 1,
        "column_name": "grade",
        "type": "DECIMAL(5, 2)",
        "value": "'abc'",
    }


def test_every_type_the_runtime_reads_has_a_converter_but_binary() -> None:
    """A declared type the runtime can run is one ad-hoc inserts check (no binary literal)."""
    assert set(STORED_TYPES) - {"VARBINARY", "BINARY"} <= set(CONVERTERS)


def test_the_batch_is_json_lines_the_runtime_reads_exactly(tmp_path: Path) -> None:
    table, rows = parse_insert(
        "insert into kinds (id, n, big, r, day, at, flag, v) values "
        "(1, 97, -0.0000000001, 1.5, '2025-1-2', '2025-01-01 10:00:00.5', 'true', 'a\"b')",
        PROGRAM,
    )
    key = write_batch(open_objects(str(tmp_path)), table, rows)
    assert key.startswith("inputs/kinds/") and key.endswith(".jsonl")
    line = (tmp_path / key).read_text()
    assert line == (
        '{"id": 1, "flag": true, "tiny": null, "small": null, "i": null, "r": 1.5, "d": null, '
        '"n": 97.00, "big": -0.0000000001, "v": "a\\"b", "c": null, "day": "2025-01-02", '
        '"at": "2025-01-01 10:00:00.500000", "t": null, "bin": null}\n'
    )
    assert json.loads(line)["big"] == pytest.approx(-1e-10)


def test_plain_rows_are_written_as_before(tmp_path: Path) -> None:
    rows = [{"id": 1, "name": "Alice"}, {"id": 2, "name": None}]
    key = write_batch(open_objects(str(tmp_path)), "students", rows)
    assert (tmp_path / key).read_text() == "".join(json.dumps(r) + "\n" for r in rows)
