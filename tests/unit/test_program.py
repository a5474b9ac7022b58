"""The program model: what is parsed, and every user error with its reason and position."""

from __future__ import annotations

import json

import pytest

from spindle.errors import SpindleError
from spindle.program import Direction, Program, parse_program


def error_of(sql: str) -> SpindleError:
    with pytest.raises(SpindleError) as caught:
        parse_program(sql)
    return caught.value


def refusal(program: Program) -> SpindleError:
    """What `refuse_unrunnable` refuses of a program that parses (the program to run)."""
    with pytest.raises(SpindleError) as refused:
        program.refuse_unrunnable()
    return refused.value


def test_tables_columns_keys_properties_and_lateness() -> None:
    program = parse_program(
        """CREATE TABLE Events (
             id BIGINT NOT NULL,
             ts TIMESTAMP LATENESS INTERVAL 1 HOUR,
             amount DECIMAL(10, 2),
             PRIMARY KEY (id)
           ) WITH ('materialized' = 'true', 'append_only' = 'TRUE');"""
    )
    table = program.tables["events"]
    assert [c.name for c in table.columns] == ["id", "ts", "amount"]
    assert [c.type for c in table.columns] == ["BIGINT", "TIMESTAMP", "DECIMAL(10, 2)"]
    assert table.primary_key == ("id",)
    assert table.materialized and table.append_only
    assert [c.name for c in table.lateness] == ["ts"]
    assert table.columns[1].lateness == "INTERVAL '1' HOUR"
    assert program.has_lateness


@pytest.mark.parametrize(
    ("properties", "said"),
    [
        # read as "false", a materialized table became one the approved change empties
        (
            "'materialised' = 'true'",
            "does not read property 'materialised'; did you mean 'materialized'?",
        ),
        ("'append-only' = 'true'", "did you mean 'append_only'?"),
        (
            "'materialized' = 'ture'",
            "property 'materialized' is 'ture', which is neither true nor false",
        ),
        ("'append_only' = ''", "property 'append_only' is '', which is neither"),
    ],
)
def test_a_table_property_spindle_would_misread_is_refused(properties: str, said: str) -> None:
    refused = refusal(parse_program(f"CREATE TABLE t (a INT) WITH ({properties});"))
    assert refused.reason == "InvalidProperty"
    assert said in refused.message
    assert "(line 1, column 14)" in refused.message


def test_other_properties_are_read_or_ignored_with_a_warning() -> None:
    program = parse_program(
        "CREATE TABLE t (a INT) WITH ('materialized' = 'Yes', 'append_only' = 'off', "
        "'owner' = 'sales');\n"
        "CREATE VIEW v WITH ('emit_final' = 'a') AS SELECT a FROM t;"
    )
    program.refuse_unrunnable()
    assert program.tables["t"].materialized and not program.tables["t"].append_only
    assert program.warnings == (
        "'t': Spindle does not read property 'owner'; it is ignored",
        "'v': Spindle does not read property 'emit_final'; it is ignored",
    )


def test_views_functions_and_dependencies() -> None:
    program = parse_program(
        """create table a (k int); create table b (k int);
           create function inc(x int) returns int as x + 1;
           create materialized view v as
             with a as (select k from b) select inc(k) as k1 from a;
           create view w as select k1 from v union select k from a;"""
    )
    assert program.views["v"].materialized
    assert program.views["v"].dependencies == ("b",)  # the CTE shadows table a
    assert program.views["v"].functions == ("inc",)
    assert program.views["w"].dependencies == ("a", "v")
    assert list(program.views) == ["v", "w"]
    assert program.functions["inc"].parameters == (("x", "INT"),)


def test_views_may_be_declared_before_what_they_read() -> None:
    program = parse_program("create view w as select k from v; create view v as select 1 as k;")
    assert list(program.views) == ["v", "w"]


def test_connectors_are_parsed_and_unnamed_ones_named_with_a_warning() -> None:
    program = parse_program(
        """create table t (a int) with ('connectors' = '[
             {"transport": {"name": "file_input", "config": {"path": "/x"}}},
             {"name": "two", "transport": {"name": "file_input", "config": {"path": "/y"}}}]');
           create view v with ('connectors' = '[{"name": "out",
             "transport": {"name": "file_output", "config": {"path": "/o"}}}]')
           as select a from t;"""
    )
    keys = {(c.key, c.direction) for c in program.connectors}
    assert keys == {
        ("t.unnamed-0", Direction.INPUT),
        ("t.two", Direction.INPUT),
        ("v.out", Direction.OUTPUT),
    }
    assert len(program.warnings) == 1 and "unnamed-0" in program.warnings[0]


def test_lateness_is_lifted_from_sqlglot_tokens_not_text() -> None:
    program = parse_program(
        """create table t (
             lateness int,                                -- a column named lateness
             "Ts" timestamp not null lateness interval '1:30' hour to minute,
             at timestamp lateness interval 5 minutes not null primary key,
             note varchar default 'lateness interval 1 hour',
             day date lateness interval (1 + 1) day
           );
           create view v as select lateness, note from t;"""
    )
    table = program.tables["t"]
    assert [c.name for c in table.columns] == ["lateness", "Ts", "at", "note", "day"]
    assert [c.lateness for c in table.columns] == [
        None,
        "INTERVAL '1:30' HOUR TO MINUTE",
        "INTERVAL '5' MINUTES",
        None,
        "INTERVAL (1 + 1) DAY",
    ]
    assert not table.columns[1].nullable and not table.columns[2].nullable
    assert table.primary_key == ("at",)
    assert program.views["v"].dependencies == ("t",)


@pytest.mark.parametrize(
    ("sql", "column", "words"),
    [
        ("create table t (a int, primary key (a) lateness interval 1 hour);", 40, "column"),
        ("create table t (ts timestamp lateness 1 hour);", 39, "one expression"),
        ("create table t (ts timestamp lateness interval);", 39, "a constant"),
        ("create table t (ts timestamp lateness interval 1 hour + x);", 39, "a constant"),
    ],
)
def test_misplaced_lateness_is_located(sql: str, column: int, words: str) -> None:
    error = error_of(sql)
    assert error.reason == "InvalidProgram"
    assert (error.details["line"], error.details["column"]) == (1, column), error.message
    assert words in error.message


@pytest.mark.parametrize(
    ("sql", "reason", "line", "column"),
    [
        ("create table t (a int);\ncreate view v as\n  select a frm t;", "InvalidProgram", 3, 16),
        ("create table t (a int;", "InvalidProgram", 1, 19),
        ("create table t (a int);\ngrant select on t to bob;", "InvalidProgram", 2, 1),
        ("create table t (a int);\ninsert into t values (1);", "InvalidProgram", 2, 1),
        (
            "create table t (a int);\n\ncreate view v as select a from missing;",
            "UnknownRelation",
            3,
            32,
        ),
        ("create table t (a int);\ncreate table T (b int);", "DuplicateRelation", 2, 14),
        ("create table t (a int);\ncreate view t as select 1 as x;", "DuplicateRelation", 2, 13),
        (
            "create view a as select x from b;\ncreate view b as select x from a;",
            "CyclicView",
            1,
            13,
        ),
        ("create table t (ts timestamp lateness);", "InvalidProgram", 1, 38),
    ],
)
def test_user_errors_have_a_reason_and_a_position(
    sql: str, reason: str, line: int, column: int
) -> None:
    error = error_of(sql)
    assert error.reason == reason
    assert (error.details["line"], error.details["column"]) == (line, column)
    assert f"line {line}, column {column}" in error.message


@pytest.mark.parametrize(
    "connectors",
    [
        "not json",
        '{"name": "x"}',
        '[{"name": "x"}]',
        '[{"name": "x", "transport": {"config": {}}}]',
        '[{"name": "x", "transport": {"name": "f"}}, {"name": "x", "transport": {"name": "f"}}]',
        "[42]",
    ],
)
def test_invalid_connectors(connectors: str) -> None:
    error = error_of(f"create table t (a int) with ('connectors' = '{connectors}');")
    assert error.reason == "InvalidConnectors"
    assert error.details["relation"] == "t"
    assert "Fix the" in error.message


def test_error_body_is_feldera_shaped() -> None:
    body = error_of("create view v as select a from nope;").body()
    assert set(body) == {"message", "error_code", "details"}
    assert body["error_code"] == "UnknownRelation"
    assert body["details"]["relation"] == "nope"


def test_comments_and_case_do_not_matter_for_names() -> None:
    program = parse_program(
        '/* c */ CREATE TABLE "Quoted" (A INT); -- x\ncreate view V as select a from "Quoted";'
    )
    assert set(program.tables) == {"Quoted"}
    assert set(program.views) == {"v"}


@pytest.mark.parametrize(
    ("sql", "kind", "at"),
    [
        # the tokenizer quoted the text before the end, at the statement's line 1, column 1
        ("create table t (a int) with ('connectors' = '[]);", "string", (1, 45)),
        ("create table t (a int);\ncreate view v as\n  select 'a as x from t;", "string", (3, 10)),
        ('create table t (a int);\ncreate view v as select "a from t;', "quoted name", (2, 25)),
        ("create table t (a int);\ncreate view v as select 'it''s from t;", "string", (2, 25)),
    ],
)
def test_a_string_never_closed_is_located_where_it_opens(
    sql: str, kind: str, at: tuple[int, int]
) -> None:
    error = error_of(sql)
    assert error.reason == "InvalidProgram"
    assert error.message.startswith(f"Syntax error: the {kind} that starts here is never closed")
    assert (error.details["line"], error.details["column"]) == at


def test_a_quoted_name_read_as_a_type_is_a_syntax_error() -> None:
    """Found by the fuzzer: sqlglot tokenizes a quoted type name again, and its TokenError
    escaped as an internal error."""
    error = error_of(
        "create table o (id int, amou\"nt decimal(10, 2)) with ('connectors' = '[{\"a\": 1}]');"
        "\ncreate view v with ('connectors' = '[]'\") as select 1 as n;"
    )
    assert error.reason == "InvalidProgram" and error.message.startswith("Syntax error: ")


@pytest.mark.parametrize(
    ("number", "instead"),
    [("5L", "CAST(5 AS BIGINT)"), ("1.5D", "CAST(1.5 AS DOUBLE)"), ("10days", "separate")],
)
def test_a_number_a_name_follows_without_a_space_is_a_syntax_error(
    number: str, instead: str
) -> None:
    """Spark's typed literal `5L` read as `5 AS l`: a view with a column `l` holding 5."""
    error = error_of(f"create table t (a int);\ncreate view v as select a, {number} from t;")
    assert error.reason == "InvalidProgram"
    assert error.message.startswith(f"Syntax error: {number!r} is a number a name follows")
    assert instead in error.message
    assert (error.details["line"], error.details["column"]) == (2, 28)
    parse_program("create table t (a int);\ncreate view v as select a, 5 l, 1e5 as e from t;")


def test_a_binary_literal_is_read() -> None:
    """`x'0A'` is Feldera's (and Spark's) BINARY literal; it was a syntax error."""
    program = parse_program(
        "create table t (b varbinary);\ncreate view v as select b from t "
        "where b <> x'00ff' and b <> X'';"
    )
    assert "x'00ff'" in program.views["v"].canonical


def test_calls_spark_takes_with_more_arguments_are_read_as_written() -> None:
    """`MAP(k1, v1, k2, v2)` and `FIRST_VALUE(x, true)` were syntax errors: sqlglot reads MAP
    with two arguments and FIRST_VALUE with one."""
    program = parse_program(
        "create table t (k int, s varchar);\n"
        "create view m as select element_at(map('a', k, 'b', k + 1), 'b') as b from t;\n"
        "create view f as select first_value(s, true) over (order by k) as f, "
        "map(1, 2) as two from t;"
    )
    program.refuse_unrunnable()
    assert program.views["m"].canonical == (
        "SELECT ELEMENT_AT(MAP('a', k, 'b', k + 1), 'b') AS b FROM t AS \"#t0\""
    )
    assert "FIRST_VALUE(s, TRUE) OVER (ORDER BY k)" in program.views["f"].canonical


def test_sparks_div_call_and_substr_from_are_read() -> None:
    """`div(a, b)`, Spark's call of its integer division, and `SUBSTR(s FROM 2)` were syntax
    errors; the operator `a DIV (b)` is still the operator."""
    program = parse_program(
        "create table t (a int, b int, s varchar);\n"
        "create view v as select div(a, b) as q, -div(a, 2) as n, a div (b) as o, "
        "substr(s from 2 for 3) as f from t where div(a, b) > 0 order by div(b, 2);"
    )
    program.refuse_unrunnable()
    assert program.views["v"].canonical == (
        "SELECT DIV(a, b) AS q, -DIV(a, 2) AS n, CAST(a / (b) AS BIGINT) AS o, "
        "SUBSTRING(s, 2, 3) AS f "
        'FROM t AS "#t0" WHERE DIV(a, b) > 0 ORDER BY DIV(b, 2)'
    )


def test_an_unknown_relation_suggests_the_closest_declared_one() -> None:
    error = error_of("create table grades (a int);\ncreate view v as select a from grade;")
    assert error.reason == "UnknownRelation"
    assert error.message.startswith(
        "View 'v' reads 'grade', which is not declared (did you mean 'grades'?); declare it"
    )


def test_a_comment_never_closed_is_refused_for_the_program_to_run() -> None:
    """Everything after `/*` was read as the comment: the view below it left the program
    without a word (a checkpointed program with one still reads: it ran so)."""
    program = parse_program("create table t (a int);\n/* old\ncreate view v as select a from t;")
    assert list(program.views) == []
    refused = refusal(program)
    assert refused.reason == "InvalidProgram"
    assert refused.message.startswith("Syntax error: the comment that starts here is never closed")
    assert (refused.details["line"], refused.details["column"]) == (2, 1)
    parse_program("create table t (a int);\ncreate view v as select '/*' as a from t;")


@pytest.mark.parametrize(
    ("columns", "word", "at"),
    [
        ("k int, unique int, x int", "unique int", (1, 31)),
        ("k int,\n like varchar", "like varchar", (2, 7)),
    ],
)
def test_a_column_named_with_a_clauses_keyword_is_a_syntax_error(
    columns: str, word: str, at: tuple[int, int]
) -> None:
    """sqlglot read `unique int` as a UNIQUE constraint and `like varchar` as a LIKE clause:
    the column left the table without a word, and every input record's field with it."""
    error = error_of(f"create table t ({columns});")
    assert error.reason == "InvalidProgram"
    assert error.message.startswith(f"Syntax error: '{word}' reads as a ")
    assert (error.details["line"], error.details["column"]) == at
    table = parse_program('create table t (k int, "unique" int, "like" int, unique (k));')
    assert [c.name for c in table.tables["t"].columns] == ["k", "unique", "like"]


def test_minus_is_except() -> None:
    """Spark's (and Oracle's) MINUS was read as an alias of the relation before it."""
    program = parse_program(
        "create table t (k int, minus int);\ncreate table u (k int);\n"
        "create view v as select k from t minus select k from u;\n"
        "create view w as select minus from t minus all (select k from u);"
    )
    assert (
        program.views["v"].canonical == 'SELECT k FROM t AS "#t0" EXCEPT SELECT k FROM u AS "#t1"'
    )
    assert "EXCEPT ALL (SELECT k FROM u" in program.views["w"].canonical


@pytest.mark.parametrize("name", ["glob", "qualify", "rlike"])
def test_a_keyword_where_a_name_goes_says_to_double_quote_it(name: str) -> None:
    error = error_of(f"create table t (k int);\ncreate view {name} as select k from t;")
    assert error.message.startswith(f"Syntax error: Expected table name but got '{name}'")
    assert f'it is a keyword, so write it in double quotes, "{name}")' in error.message
    quoted = parse_program(f'create table t (k int);\ncreate view "{name}" as select k from t;')
    assert list(quoted.views) == [name]
    assert (
        "double quotes"
        not in error_of("create table t (k int);\ncreate view v as selec k;").message
    )


@pytest.mark.parametrize(
    ("sql", "reason", "said"),
    [
        # Spark registers both under one name: a view reading "T" read t's rows
        (
            'create table "Sales" (a int);\ncreate table sales (b int);',
            "DuplicateRelation",
            "'sales' and 'Sales' (line 1) differ only in case",
        ),
        (
            "create function f(x int) returns int as x;\n"
            'create function "F"(y int) returns int as y;',
            "DuplicateFunction",
            "'F' and 'f' (line 1) differ only in case",
        ),
        # Spark ran its own UPPER where the program called its `upper`, and an edit of the body
        # reported views modified that the edit could not change
        *(
            (
                f"create function {name}(s varchar) returns varchar as s;",
                "DuplicateFunction",
                f"'{name.lower()}' is a Spark function: a call would run Spark's",
            )
            for name in ("upper", "NVL", "ceiling", "coalesce")
        ),
    ],
)
def test_names_spark_would_read_as_another_are_refused_in_a_program_to_run(
    sql: str, reason: str, said: str
) -> None:
    """Refused for the program to run; a checkpointed program that has them (it ran, as it
    was) still parses, so a change can fix them."""
    error = refusal(parse_program(sql))
    assert error.reason == reason and error.details["line"] in (1, 2)
    assert said in error.message


@pytest.mark.parametrize(
    "declared",
    [
        "hash(a int, b int)",
        "e(a int, b int)",
        "add_one(a int, b int)",
        # a built-in's name with another arity: the probe did not parse, and crashed the parse
        "apply(a int, b int, c int, d int)",
        "year(d date, tz varchar)",
        "left(s varchar)",
        '"a b"(a int)',  # a quoted name no call of a built-in has
        '"select"(a int)',
    ],
)
def test_a_function_named_as_a_call_the_parser_does_not_know_is_the_programs(
    declared: str,
) -> None:
    """Inlined where it is called (`runtime.translate`): the program's own runs."""
    parse_program(f"create function {declared} returns int as 1;").refuse_unrunnable()


def test_every_unknown_relation_is_listed_first_one_first() -> None:
    """Only the first was named: a fix per run, where one round of fixes should do."""
    error = error_of(
        "create table t (id bigint);\n"
        "create view x as select id from uu;\n"
        "create view v as select id from tt;\n"
    )
    assert error.reason == "UnknownRelation" and error.details["line"] == 2
    assert error.details["problems"] == 2
    [other] = error.details["more"]
    assert "View 'v' reads 'tt'" in other and "(line 3, column 33)" in other


def test_a_missing_semicolon_between_statements_is_hinted() -> None:
    error = error_of("create table t (id bigint)\ncreate view v as select id from t;")
    assert error.message.startswith("Syntax error: Unexpected 'create' (each statement ends")
    assert (error.details["line"], error.details["column"]) == (2, 1)


INPUT = json.dumps([{"transport": {"name": "file_input", "config": {"path": "/x"}}}])
GIVEN_TWICE = {  # the last value was read without a word
    "connectors": (
        f"create table t (a int) with ('connectors' = '{INPUT}', 'connectors' = '[]');",
        "'t': property 'connectors' is given twice (keys are read regardless of case), and only "
        "the last value was read; keep one (line 1, column 14)",
        (),
    ),
    "materialized": (
        "create table t (a int) with ('materialized' = 'true', 'materialized' = 'false');",
        "'t': property 'materialized' is given twice",
        (),
    ),
    "in another case": (
        f"create table t (a int) with ('Connectors' = '[]',\n  'connectors' = '{INPUT}');",
        "'t': property 'connectors' is given twice",
        ("t.unnamed-0",),
    ),
}


@pytest.mark.parametrize(("sql", "said", "keys"), GIVEN_TWICE.values(), ids=GIVEN_TWICE.keys())
def test_a_property_given_twice_is_refused_in_a_program_to_run(
    sql: str, said: str, keys: tuple[str, ...]
) -> None:
    program = parse_program(sql)
    program.refuse_unrunnable(references=False)  # one that ran read the last value, and runs so
    assert tuple(c.key for c in program.connectors) == keys
    refused = refusal(program)
    assert refused.reason == "InvalidProperty" and said in refused.message
    assert (refused.details["line"], refused.details["column"]) == (1, 14)


def test_a_clause_spindle_does_not_read_is_named_in_its_warning() -> None:
    """`COMMENT 'x'` was warned of as a property named 'x'; `PARTITIONED BY` went unsaid."""
    program = parse_program(
        "create table t (a int) comment 'x' location '/tmp/x' using delta;\n"
        "create table u (a int) engine = memory partitioned by (a);\n"
        "create view v comment 'the view' as select a from t;"
    )
    program.refuse_unrunnable()
    assert program.warnings == (
        "'t': Spindle does not read the clause `COMMENT 'x'`; it is ignored",
        "'t': Spindle does not read the clause `LOCATION '/tmp/x'`; it is ignored",
        "'t': Spindle does not read the clause `USING DELTA`; it is ignored",
        "'u': Spindle does not read the clause `ENGINE=memory`; it is ignored",
        "'u': Spindle does not read the clause `PARTITIONED BY (a)`; it is ignored",
        "'v': Spindle does not read the clause `COMMENT 'the view'`; it is ignored",
    )
    said = "create table t (a int) comment 'materialized';"  # no property of that name
    assert not parse_program(said).tables["t"].materialized


T = "create table t (a int);\n"
NESTED = "Comments nest: the /* inside it opens a comment of its own, which needs a */ too"

NESTED_COMMENTS = {  # (program, the views read, the problem: its start, where)
    "closed by the last */": (
        T + "create view v as select a /* a /* b */ c */ from t;",
        ["v"],
        None,
    ),
    "a statement inside": (
        T + "/* outer /* inner */ ; create view zz as select a from t; */\n"
        "create view v as select a from t;",
        ["v"],
        None,
    ),
    "a /* right after the opening one does not nest": (
        T + "create view v as select a /*/* x */ from t;",
        ["v"],
        None,
    ),
    "never closed, in a statement": (
        T + "create view v as select a from t /* a /* b */ ;\ncreate view w as select a from t;",
        None,
        ("Syntax error: the comment that starts here is never closed. " + NESTED, (2, 34)),
    ),
    "never closed, between statements": (  # read as before comments nested: a program ran so
        T + "/* a /* b */\ncreate view v as select a from t;",
        ["v"],
        ("Syntax error: the comment that starts here is never closed. " + NESTED, (2, 1)),
    ),
    "never closed, nothing nested": (
        T + "/* old\ncreate view v as select a from t;",
        [],
        (
            "Syntax error: the comment that starts here is never closed; everything after it "
            "was read as a comment. Close it with */ (comments nest: each /* needs a */ of its "
            "own)",
            (2, 1),
        ),
    ),
}


@pytest.mark.parametrize(
    ("sql", "views", "problem"), NESTED_COMMENTS.values(), ids=NESTED_COMMENTS.keys()
)
def test_block_comments_nest_as_sqlglot_reads_them(
    sql: str, views: list[str] | None, problem: tuple[str, tuple[int, int]] | None
) -> None:
    """The statement splitter closed a comment at its first */, sqlglot at the */ of its own
    level: an unclosed comment was `Cannot tokenize` at the statement's start, and a statement
    in a comment was read as one."""
    if views is None:  # the statement cannot be read
        assert problem is not None
        error = error_of(sql)
    else:
        program = parse_program(sql)
        assert list(program.views) == views
        if problem is None:
            program.refuse_unrunnable()
            return
        error = refusal(program)
    said, at = problem
    assert (error.reason, error.details["line"], error.details["column"]) == ("InvalidProgram", *at)
    assert error.message.startswith(said)


@pytest.mark.parametrize("length", range(8))
def test_a_block_comments_end_is_sqlglots(length: int) -> None:
    """Every comment of up to 7 characters of `/`, `*` and a letter after its `/*` ends where
    sqlglot's tokenizer ends it, or never closes where it fails."""
    from itertools import product

    from sqlglot.errors import TokenError

    from spindle.program.dialect import DIALECT
    from spindle.program.statements import block_comment

    for chars in product("/*a", repeat=length):
        text = "select 1 /*" + "".join(chars) + "\n"
        end = block_comment(text, 9).end
        try:
            tokens = DIALECT.tokenize(text)
        except TokenError:
            tokens = []
        if end < 0:
            assert not tokens, text
        elif tokens:
            assert tokens[1].comments[0] == text[11 : end - 2], text
        else:  # what follows it does not tokenize: a comment it opens never closes
            later = text.find("/*", end)
            assert later >= 0 and block_comment(text, later).end < 0, text


UNTOKENIZED = {  # what sqlglot cannot tokenize: said at its position, with what to do
    "a hex string of other digits": (
        "create view v as select x'zz' as b from t;",
        "Syntax error: a binary literal (x'0A') of other characters than hexadecimal digits. "
        "Write its bytes in hex (0-9, A-F), or drop the x for a string",
        (2, 25),
    ),
    "a template's comment never closed": (
        "create view v as\n  select {# a from t;",
        "Syntax error: the comment that starts here is never closed. {# opens a comment (a "
        "template's, to the parser) that ends at #}. Close it with #}, or write the text in a "
        "string",
        (3, 10),
    ),
    "a quote in backticks": (  # no quote to sqlglot: the ' opens a string
        "create view v as select `a'` from t;",
        'Syntax error: a backtick. Names are quoted with double quotes here: write "id", not `id`',
        (2, 25),
    ),
    "a string never closed": (
        "create view v as select 'a from t;",
        "Syntax error: the string that starts here is never closed. Close it with ' (a ' "
        "inside a string is written '')",
        (2, 25),
    ),
}


@pytest.mark.parametrize(("view", "said", "at"), UNTOKENIZED.values(), ids=UNTOKENIZED.keys())
def test_what_sqlglot_cannot_tokenize_is_said_where_it_is(
    view: str, said: str, at: tuple[int, int]
) -> None:
    error = error_of(T + view)
    where = (error.details["line"], error.details["column"])
    assert (error.reason, error.message, where) == (
        "InvalidProgram",
        f"{said} (line {at[0]}, column {at[1]})",
        at,
    )


def test_a_comma_right_after_another_is_refused_in_a_program_to_run() -> None:
    """`SELECT a,, b` read as `SELECT a, b`: what was left out between them read as never
    written."""
    program = parse_program(
        "create table t (a int,, b int);\n"
        "create view v as select a, /* c */ , b, ',,' as s from t;\n"
        "create view w as select a, -b as n from t;"
    )
    program.refuse_unrunnable(references=False)  # one that ran read them as one, and runs so
    assert [c.name for c in program.tables["t"].columns] == ["a", "b"]
    error = refusal(program)
    assert (error.reason, error.details["line"], error.details["column"]) == (
        "InvalidProgram",
        1,
        23,
    )
    said = "Syntax error: a comma right after another, with nothing between them; remove one"
    assert error.message.startswith(said) and error.message.endswith("(line 1, column 23)")
    assert error.details["problems"] == 2 and "(line 2, column 36)" in error.details["more"][0]
