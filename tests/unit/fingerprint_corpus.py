"""The fingerprint corpus: 200+ programs whose statements' fingerprints and normalized text are
recorded in tests/golden/fingerprints/expected.json, so a parser upgrade that changes them is
noticed (`test_fingerprint_stability.py`).

The programs are the examples, the golden plan cases and generated ones that cover every
statement form Spindle supports, frozen as files under tests/golden/fingerprints/programs/. A
program's text is recorded by digest, so an edited program is told apart from a parser change.

    python -m tests.unit.fingerprint_corpus build    # (re)write the programs and the record
    python -m tests.unit.fingerprint_corpus record   # re-record expected.json only
    python -m tests.unit.fingerprint_corpus compare  # count differences with this parser
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlglot

from spindle.program import fingerprint, parse_program
from spindle.program.fingerprint import FINGERPRINT_VERSION
from spindle.versions import PARSER_VERSION

ROOT = Path(__file__).resolve().parent.parent.parent
CORPUS = ROOT / "tests" / "golden" / "fingerprints"
PROGRAMS = CORPUS / "programs"
EXPECTED = CORPUS / "expected.json"

TABLES = """create table customers (
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
"""

QUERIES = {
    "filter": "select id, amount * 2 as doubled from orders where status = 'paid'",
    "inner_join": "select o.id, c.name from orders o join customers c on o.customer_id = c.id",
    "explicit_inner_join": (
        "select o.id, c.name from orders as o inner join customers as c on o.customer_id = c.id"
    ),
    "left_join": "select c.id, o.amount from customers c left join orders o "
    "on o.customer_id = c.id",
    "right_join": "select c.id, o.amount from customers c right join orders o "
    "on o.customer_id = c.id",
    "full_join": (
        "select c.id, o.amount from customers c full outer join orders o on o.customer_id = c.id"
    ),
    "cross_join": "select c.id, i.sku from customers c cross join items i",
    "join_using": "select order_id, sku from items join (select id as order_id from orders) o "
    "using (order_id)",
    "self_join": "select a.id, b.id as other from orders a join orders b "
    "on a.customer_id = b.customer_id and a.id < b.id",
    "three_way_join": "select c.name, i.sku, i.qty from customers c join orders o "
    "on o.customer_id = c.id join items i on i.order_id = o.id",
    "aggregate": "select customer_id, count(*) as n, sum(amount) as total, avg(amount) as mean, "
    "min(ts) as first_ts, max(ts) as last_ts from orders group by customer_id",
    "count_distinct": "select status, count(distinct customer_id) as customers from orders "
    "group by status",
    "having": "select customer_id, sum(amount) as total from orders group by customer_id "
    "having sum(amount) > 100",
    "distinct": "select distinct region from customers",
    "union_all": "select id from orders union all select id from customers",
    "union": "select id from orders union select id from customers",
    "intersect": "select id from orders intersect select id from customers",
    "except": "select id from orders except select id from customers",
    "cte": "with paid as (select * from orders where status = 'paid') "
    "select customer_id, count(*) as n from paid group by customer_id",
    "ctes": "with a as (select id, customer_id from orders), b as (select id, name from customers) "
    "select a.id, b.name from a join b on a.customer_id = b.id",
    "nested_cte": "with a as (with b as (select id from orders) select id from b) select id from a",
    "cte_shadowing": "with orders as (select id from customers) select id from orders",
    "row_number": "select id, row_number() over (partition by customer_id order by ts) as rn "
    "from orders",
    "rank": "select id, rank() over (order by amount desc) as r, "
    "dense_rank() over (order by amount desc) as dr from orders",
    "lag_lead": "select id, lag(amount, 1) over (partition by customer_id order by ts) as prev, "
    "lead(amount) over (partition by customer_id order by ts) as next from orders",
    "window_frame": "select id, sum(amount) over (partition by customer_id order by ts "
    "rows between unbounded preceding and current row) as running from orders",
    "window_range": "select id, avg(amount) over (order by ts range between interval '1' hour "
    "preceding and current row) as moving from orders",
    "scalar_subquery": "select id, (select max(amount) from orders) as top from customers",
    "in_subquery": "select id from customers where id in (select customer_id from orders)",
    "exists": "select c.id from customers c where exists "
    "(select 1 from orders o where o.customer_id = c.id)",
    "derived_table": "select t.customer_id, t.total from (select customer_id, sum(amount) as total "
    "from orders group by customer_id) t where t.total > 10",
    "case": "select id, case when amount > 100 then 'big' when amount > 10 then 'medium' "
    "else 'small' end as size from orders",
    "functions": "select id, coalesce(name, 'unknown') as name, nullif(region, '') as region, "
    "upper(name) as up, lower(name) as low, length(name) as len from customers",
    "casts": "select id, cast(amount as double) as a, cast(id as varchar) as s, "
    "cast(ts as date) as d from orders",
    "literals": "select id, date '2025-01-31' as d, timestamp '2025-01-31 12:00:00' as t, "
    "1.50 as dec, 'it''s' as quote, true as yes, null as nothing from orders",
    "intervals": "select id, ts + interval '1' day as tomorrow, ts - interval '2' hour as earlier "
    "from orders",
    "string_ops": "select id, name || '@' || region as label, substring(name, 1, 3) as prefix, "
    "trim(name) as trimmed from customers",
    "extract": "select id, extract(year from ts) as y, extract(month from ts) as m from orders",
    "order_limit": "select id, amount from orders order by amount desc limit 10",
    "between_like": "select id from customers where name like 'A%' and id between 1 and 100",
    "is_null": "select id from orders where status is null or amount is not null",
    "arithmetic": "select id, (amount + 1) * 2 / 3 - 4 as x, amount % 7 as r, -amount as neg "
    "from orders",
    "boolean_logic": "select id from orders where not (status = 'void' or amount < 0) "
    "and (customer_id > 0)",
    "group_by_expression": "select cast(ts as date) as day, sum(amount) as total from orders "
    "group by cast(ts as date)",
    "quoted_identifiers": 'select id as "OrderId", amount as "Amount in EUR" from orders',
    "star": "select * from items",
    "qualified_star": "select o.*, c.name from orders o join customers c on o.customer_id = c.id",
    "in_list": "select id from orders where status in ('paid', 'shipped', 'void')",
}

STYLES = {
    "lower": lambda sql: sql,
    "upper": lambda sql: sql.upper().replace("'PAID'", "'paid'"),
    "spaced": lambda sql: sql.replace(" from ", "\n  from ").replace(" where ", "\n  where "),
}


def _view_programs() -> Iterator[tuple[str, str]]:
    """Each query form as a view, read by a view over it, in three spellings."""
    for name, query in QUERIES.items():
        for style, spell in STYLES.items():
            if style == "upper" and "'" in query.replace("'paid'", ""):
                continue  # string literals would change meaning
            kind = "materialized view" if style == "spaced" else "view"
            body = spell(query)
            sql = f"{TABLES}create {kind} v_{name} as {body};\n"
            sql += f"create view v_{name}_count as select count(*) as n from v_{name};\n"
            yield f"gen-view-{name}-{style}", sql


UDFS = {
    "scalar": "create function add_one(x int) returns int as x + 1;",
    "two_arguments": "create function weighted(a double, w double) returns double as a * w;",
    "case_body": "create function grade(x decimal(10, 2)) returns varchar as "
    "case when x > 100 then 'A' else 'B' end;",
    "nested_calls": "create function add_one(x int) returns int as x + 1;\n"
    "create function add_two(x int) returns int as add_one(add_one(x));",
    "builtin_calls": "create function clean(s varchar) returns varchar as upper(trim(s));",
    "boolean": "create function is_big(x decimal(10, 2)) returns boolean as x > 100;",
}
UDF_USES = {
    "scalar": "select add_one(qty) as q from items",
    "two_arguments": "select weighted(price, 0.5) as w from items",
    "case_body": "select id, grade(amount) as g from orders",
    "nested_calls": "select add_two(qty) as q from items where add_one(qty) > 2",
    "builtin_calls": "select clean(name) as n from customers group by clean(name)",
    "boolean": "select id from orders where is_big(amount)",
}


def _udf_programs() -> Iterator[tuple[str, str]]:
    for name, declaration in UDFS.items():
        yield f"gen-udf-{name}", f"{declaration}\n{TABLES}create view v as {UDF_USES[name]};\n"
        yield (
            f"gen-udf-{name}-unused",
            f"{TABLES}{declaration}\ncreate view v as select id from orders;\n",
        )


LATENESS = {
    "hour": "ts timestamp lateness interval 1 hour",
    "quoted_minutes": "ts timestamp lateness interval '5' minute",
    "day_not_null": "ts timestamp not null lateness interval '1' day",
    "numeric": "seq bigint lateness 10",
    "two_columns": "ts timestamp lateness interval 1 hour, seq bigint lateness 100",
    "before_key": "id bigint not null primary key, ts timestamp lateness interval 30 second",
}


def _lateness_programs() -> Iterator[tuple[str, str]]:
    for name, columns in LATENESS.items():
        table = f"create table events (k int, {columns}, v double) with ('append_only' = 'true');"
        view = "create view per_k as select k, count(*) as n from events group by k;"
        yield f"gen-lateness-{name}", f"{table}\n{view}\n"


def _connectors(entries: list[dict[str, Any]]) -> str:
    return json.dumps(entries).replace("'", "''")


INPUTS = {
    "kafka_named": [
        {
            "name": "kafka",
            "transport": {
                "name": "kafka_input",
                "config": {"topic": "orders", "bootstrap.servers": "kafka:9092"},
            },
            "format": {"name": "json", "config": {"update_format": "raw"}},
        }
    ],
    "file_unnamed": [
        {"transport": {"name": "file_input", "config": {"path": "/data/orders.csv"}}},
        {"transport": {"name": "url_input", "config": {"path": "https://example.com/o.csv"}}},
    ],
    "delta_with_knobs": [
        {
            "name": "delta",
            "transport": {"name": "delta_table_input", "config": {"uri": "s3://b/orders"}},
            "max_batch_size": 1000,
            "max_queued_records": 50000,
            "paused": False,
        }
    ],
    "csv_format": [
        {
            "name": "csv",
            "transport": {"name": "file_input", "config": {"path": "a.csv"}},
            "format": {"name": "csv", "config": {"delimiter": ";", "headers": True}},
        }
    ],
}
OUTPUTS = {
    "kafka_output": [
        {
            "name": "out",
            "transport": {"name": "kafka_output", "config": {"topic": "totals"}},
            "format": {"name": "json"},
        }
    ],
    "delta_output": [
        {
            "name": "lake",
            "transport": {
                "name": "delta_table_output",
                "config": {"uri": "s3://b/totals", "mode": "truncate"},
            },
        }
    ],
    "unnamed_output": [{"transport": {"name": "file_output", "config": {"path": "out.json"}}}],
}


def _connector_programs() -> Iterator[tuple[str, str]]:
    for name, inputs in INPUTS.items():
        for output_name, outputs in OUTPUTS.items():
            table = (
                "create table orders (id bigint, amount decimal(10, 2)) with "
                f"('materialized' = 'true', 'connectors' = '{_connectors(inputs)}');"
            )
            view = (
                "create materialized view totals with "
                f"('connectors' = '{_connectors(outputs)}') as "
                "select count(*) as n, sum(amount) as total from orders;"
            )
            yield f"gen-connectors-{name}-{output_name}", f"{table}\n{view}\n"


TYPES = (
    "a tinyint, b smallint, c int, d integer, e bigint",
    "a boolean, b real, c float, d double",
    "a varchar, b varchar(255), c char(10), d string, e text",
    "a decimal(38, 10), b decimal(5, 2), c numeric(12, 4)",
    "a date, b timestamp, c varbinary, d binary",
    'a int not null, "Mixed Case" varchar, "quoted""name" int, primary key (a)',
)


def _type_programs() -> Iterator[tuple[str, str]]:
    for index, columns in enumerate(TYPES):
        listed = columns.replace(", ", ",\n  ")
        table = f"create table t (\n  {listed}\n);"
        yield f"gen-types-{index}", f"{table}\ncreate view v as select * from t;\n"


def _chain_programs() -> Iterator[tuple[str, str]]:
    for length in (2, 5, 20):
        views = [
            f"create view v{i} as select id, amount + {i} as amount from "
            f"{f'v{i - 1}' if i else 'orders'} where amount > {i};"
            for i in range(length)
        ]
        yield f"gen-chain-{length}", TABLES + "\n".join(views) + "\n"
        yield f"gen-chain-{length}-reversed", TABLES + "\n".join(reversed(views)) + "\n"


def generated() -> dict[str, str]:
    """Every generated program by name; each one parses."""
    programs = dict(
        [
            *_view_programs(),
            *_udf_programs(),
            *_lateness_programs(),
            *_connector_programs(),
            *_type_programs(),
            *_chain_programs(),
        ]
    )
    for name, sql in programs.items():
        try:
            parse_program(sql)
        except Exception as error:
            raise AssertionError(f"generated program {name} does not parse: {error}") from None
    return programs


def programs() -> dict[str, str]:
    """The corpus by path: the examples and the golden plan cases where they live, and the
    generated programs as committed under tests/golden/fingerprints/programs."""
    found: dict[str, str] = {}
    for source in (ROOT / "examples", ROOT / "tests" / "golden" / "plan", PROGRAMS):
        for path in sorted(source.rglob("*.sql")):
            text = path.read_text(encoding="utf-8")
            if text not in found.values():
                found[str(path.relative_to(ROOT))] = text
    return found


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def statements(sql: str) -> dict[str, dict[str, str]]:
    """Each statement's fingerprint and normalized text (what its fingerprint covers)."""
    program = parse_program(sql)
    prints = fingerprint(program)
    found: dict[str, dict[str, str]] = {}
    for name, table in program.tables.items():
        columns = ", ".join(
            f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}"
            + (f" LATENESS {c.lateness}" if c.lateness else "")
            for c in table.columns
        )
        flags = [
            f
            for f, on in (("materialized", table.materialized), ("append_only", table.append_only))
            if on
        ]
        key = f"PRIMARY KEY ({', '.join(table.primary_key)})" if table.primary_key else ""
        normalized = " ".join(part for part in (f"({columns})", key, *flags) if part)
        found[f"table:{name}"] = {"fingerprint": prints.tables[name], "normalized": normalized}
    for name, view in program.views.items():
        found[f"view:{name}"] = {"fingerprint": prints.views[name], "normalized": view.canonical}
    for name, function in program.functions.items():
        found[f"function:{name}"] = {
            "fingerprint": prints.functions[name],
            "normalized": function.canonical,
        }
    for connector in program.connectors:
        found[f"connector:{connector.key}"] = {
            "fingerprint": prints.connectors[connector.key],
            "normalized": connector.comparable,
        }
    found["program"] = {"fingerprint": prints.program, "normalized": ""}
    return found


def record() -> dict[str, Any]:
    return {
        "parser_version": PARSER_VERSION,
        "sqlglot": sqlglot.__version__,
        "fingerprint_version": FINGERPRINT_VERSION,
        "programs": {
            name: {"text_sha256": _digest(sql), "statements": statements(sql)}
            for name, sql in programs().items()
        },
    }


def differences(expected: dict[str, Any]) -> list[str]:
    """Every statement whose fingerprint or normalized text differs from the record."""
    found: list[str] = []
    for name, sql in programs().items():
        recorded = expected["programs"].get(name)
        if recorded is None or recorded["text_sha256"] != _digest(sql):
            found.append(f"{name}: new or edited since it was recorded (re-record it)")
            continue
        current = statements(sql)
        for key in sorted(set(recorded["statements"]) | set(current)):
            before, after = recorded["statements"].get(key), current.get(key)
            if before != after:
                found.append(
                    f"{name} {key}:\n    recorded: {before and before['normalized']!r}"
                    f"\n    now:      {after and after['normalized']!r}"
                )
    return found


def build() -> None:
    shutil.rmtree(PROGRAMS, ignore_errors=True)
    PROGRAMS.mkdir(parents=True)
    for name, sql in generated().items():
        (PROGRAMS / f"{name}.sql").write_text(sql, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.unit.fingerprint_corpus")
    parser.add_argument("action", choices=("build", "record", "compare"))
    action = parser.parse_args().action
    if action == "build":
        build()
    if action in ("build", "record"):
        EXPECTED.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(programs())} programs with sqlglot {sqlglot.__version__}")
        return 0
    expected = json.loads(EXPECTED.read_text())
    found = differences(expected)
    total = sum(len(program["statements"]) for program in expected["programs"].values())
    changed_programs = {line.split(" ", 1)[0].rstrip(":") for line in found}
    print(
        f"sqlglot {sqlglot.__version__} against the record of sqlglot {expected['sqlglot']}: "
        f"{len(found)} of {total} fingerprints differ, in {len(changed_programs)} of "
        f"{len(expected['programs'])} programs"
    )
    print("\n".join(found[:40]))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
