"""A hypothesis strategy for Spindle programs, and renderers that vary only the formatting.

A program is drawn as a structure (tables, then views reading earlier relations) and rendered to
SQL under a `Style`: keyword case, whitespace, comments, optional AS/INNER and alias spelling. Two
renderings of one structure must be the same program.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

TYPES = ("INT", "BIGINT", "VARCHAR", "DECIMAL(5, 2)", "DATE", "DOUBLE")


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ViewSpec:
    name: str
    source: str
    join: str | None
    columns: tuple[str, ...]
    aggregate: bool
    threshold: int


@dataclass(frozen=True)
class ProgramSpec:
    tables: tuple[TableSpec, ...]
    views: tuple[ViewSpec, ...]


@dataclass(frozen=True)
class Style:
    upper: bool
    newlines: bool
    comments: bool
    explicit_as: bool
    explicit_inner: bool
    alias_prefix: str


styles = st.builds(
    Style,
    upper=st.booleans(),
    newlines=st.booleans(),
    comments=st.booleans(),
    explicit_as=st.booleans(),
    explicit_inner=st.booleans(),
    alias_prefix=st.sampled_from(["a", "src", "x_"]),
)


@st.composite
def programs(draw: st.DrawFn) -> ProgramSpec:
    n_tables = draw(st.integers(1, 3))
    tables = tuple(
        TableSpec(
            name=f"t{i}",
            columns=(
                ("id", "BIGINT"),
                *((f"c{j}", draw(st.sampled_from(TYPES))) for j in range(draw(st.integers(1, 3)))),
            ),
        )
        for i in range(n_tables)
    )
    columns = {t.name: [c for c, _ in t.columns] for t in tables}
    views: list[ViewSpec] = []
    for i in range(draw(st.integers(1, 6))):
        source = draw(st.sampled_from(sorted(columns)))
        others = sorted(set(columns) - {source})
        join = draw(st.sampled_from([None, *others])) if others else None
        picked = tuple(
            draw(st.lists(st.sampled_from(columns[source]), min_size=1, max_size=3, unique=True))
        )
        aggregate = draw(st.booleans())
        view = ViewSpec(f"v{i}", source, join, picked, aggregate, draw(st.integers(0, 9)))
        views.append(view)
        columns[view.name] = ["id", *[c for c in picked if c != "id"]] + (
            ["n"] if aggregate else []
        )
    return ProgramSpec(tables, tuple(views))


def _kw(style: Style, word: str) -> str:
    return word.upper() if style.upper else word.lower()


def render(spec: ProgramSpec, style: Style) -> str:
    sep = "\n    " if style.newlines else " "
    out: list[str] = []
    for table in spec.tables:
        cols = f",{sep}".join(f"{c} {_kw(style, t)}" for c, t in table.columns)
        if style.comments:
            out.append(f"-- table {table.name}")
        out.append(
            f"{_kw(style, 'create table')} {table.name} ({cols}) "
            f"{_kw(style, 'with')} ('materialized' = 'true');"
        )
    for view in spec.views:
        a, b = f"{style.alias_prefix}1", f"{style.alias_prefix}2"
        as_ = f" {_kw(style, 'as')} " if style.explicit_as else " "
        selected = ["id", *[c for c in view.columns if c != "id"]]
        projections = [f"{a}.{c}" for c in selected]
        group = ""
        if view.aggregate:
            projections.append(f"{_kw(style, 'count')}(*){as_}n")
            group = f"{sep}{_kw(style, 'group by')} " + ", ".join(f"{a}.{c}" for c in selected)
        source = f"{view.source}{as_}{a}"
        if view.join:
            inner = _kw(style, "inner join") if style.explicit_inner else _kw(style, "join")
            source += f"{sep}{inner} {view.join}{as_}{b} {_kw(style, 'on')} {a}.id = {b}.id"
        if style.comments:
            out.append(f"/* view {view.name} */")
        out.append(
            f"{_kw(style, 'create view')} {view.name} {_kw(style, 'as')}{sep}"
            f"{_kw(style, 'select')} {', '.join(projections)}{sep}{_kw(style, 'from')} {source}"
            f"{sep}{_kw(style, 'where')} {a}.id > {view.threshold}{group};"
        )
    return "\n".join(out) + "\n"


def leaf_views(spec: ProgramSpec) -> list[str]:
    read = {v.source for v in spec.views} | {v.join for v in spec.views if v.join}
    return [v.name for v in spec.views if v.name not in read]
