"""Golden change SQL: a view's query in, the SQL its change is computed with out
(tests/golden/change_sql/*.sql: `-- input`, then `-- change`). Reviewed by hand against the
algebra in `spindle.runtime.change_sql`; a rewrite that changes one must say why."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import parse_one

from spindle.plan.maintenance import Linear, decompose, references
from spindle.runtime import change_sql

GOLDEN = Path(__file__).parent.parent / "golden" / "change_sql"
SOURCES = change_sql.Sources(
    old={"t1": "t1_old", "t2": "t2_old"},
    new={"t1": "t1_new", "t2": "t2_new"},
    change={"t1": "t1_d", "t2": "t2_d"},
    present=lambda name, new: f"{name}_present_{'new' if new else 'old'}",
    define=lambda sql, negated: f"{'minus' if negated else 'plus'}({sql})",
)


def case(path: Path) -> tuple[str, str]:
    _, rest = path.read_text().split("-- input\n", 1)
    query, change = rest.split("-- change\n", 1)
    return query.strip(), change.strip()


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.sql")), ids=lambda p: p.stem)
def test_change_sql_matches_its_golden(path: Path) -> None:
    query, expected = case(path)
    shape = decompose(parse_one(query, dialect="spark"))
    assert isinstance(shape, Linear)
    relations = [tuple(t.name for t in references(block)) for block in shape.blocks]
    sql = change_sql.linear_change(shape, relations, SOURCES)
    assert sql is not None
    assert sql.replace(" UNION ALL ", "\nUNION ALL\n") == expected


def test_an_unchanged_right_side_reads_no_left_state_again() -> None:
    """Only the left side changed: the inner term and the new left rows' unmatched term."""
    shape = decompose(parse_one("select a.id from t1 a left join t2 b on a.k = b.k"))
    assert isinstance(shape, Linear)
    only_left = change_sql.Sources(
        old=SOURCES.old,
        new=SOURCES.new,
        change={"t1": "t1_d", "t2": None},
        present=SOURCES.present,
        define=SOURCES.define,
    )
    sql = change_sql.linear_change(shape, [("t1", "t2")], only_left)
    assert sql is not None
    assert sql.count(" UNION ALL ") == 1 and "t1_old" not in sql and "SEMI" not in sql
