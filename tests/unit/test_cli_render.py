"""What the CLI prints: query rows (NULL is not the string 'None') and checkpoint ids (never
cut, so `checkpoints show` can take them; nothing is cut when the output is not a terminal)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from spindle.checkpoint import Manifest
from spindle.checkpoint.store import open_store
from spindle.cli.main import main
from spindle.cli.render import print_rows
from tests.checkpoints import manifest


def _table(text: str) -> list[str]:
    """A rendered table's lines (not its title)."""
    return [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]


def _cells(text: str) -> list[tuple[str, ...]]:
    """The cells of each row of a rendered table (its header included)."""
    rows = [line for line in _table(text) if line[:1] in "┃│"]
    return [tuple(cell.strip() for cell in re.split("[┃│]", row)[1:-1]) for row in rows]


def test_null_is_shown_as_null_and_values_as_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    rows: list[dict[str, Any]] = [
        {"id": 6, "name": None},
        {"id": 7, "name": "None"},
        {"id": 8, "name": "[bold]x[/]"},  # a value, not markup
    ]
    print_rows(rows, as_json=False)
    out = capsys.readouterr().out
    assert _cells(out) == [("id", "name"), ("6", "NULL"), ("7", "None"), ("8", "[bold]x[/]")]
    assert "(3 rows)" in out
    print_rows(rows[:1], as_json=True)
    assert '"name": null' in capsys.readouterr().out  # JSON keeps null


def test_a_table_shows_control_characters_escaped_and_nested_values_as_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A stored string with an escape sequence retitled or recoloured the user's terminal;
    nested values and booleans showed Python's repr (`{'a': None}`, `True`)."""
    rows: list[dict[str, Any]] = [
        {"s": "\x1b]0;owned\x07red\x1b[31m", "m": {"a": None, "b": [1]}, "f": True},
    ]
    print_rows(rows, as_json=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert _cells(out)[1] == ("\\x1b]0;owned\\x07red\\x1b[31m", '{"a": null, "b": [1]}', "true")


def test_a_count_of_one_or_none_reads_as_english(capsys: pytest.CaptureFixture[str]) -> None:
    """`(1 rows)`, and a blank line of a table without columns above `(0 rows)`."""
    print_rows([{"id": 6}], as_json=False)
    assert capsys.readouterr().out.endswith("(1 row)\n")
    print_rows([], as_json=False)
    assert capsys.readouterr().out == "(0 rows)\n"


def test_an_answer_without_rows_still_names_its_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A query that matches nothing shows what it would have shown (its header), so a user
    can tell an empty answer from a wrong query."""
    print_rows([], columns=("student_id", "avg"), as_json=False)
    out = capsys.readouterr().out
    assert _cells(out) == [("student_id", "avg")]
    assert out.endswith("(0 rows)\n")
    print_rows([], columns=("student_id", "avg"), as_json=True)
    assert capsys.readouterr().out == "[]\n"  # `--json` is the rows, as ever


def test_a_cut_answer_counts_its_rows_in_english(capsys: pytest.CaptureFixture[str]) -> None:
    print_rows([{"id": 6}], as_json=False, truncated=True)
    assert "(the first row: the query has more." in capsys.readouterr().out
    print_rows([{"id": n} for n in range(1200)], as_json=False, truncated=True)
    assert "(the first 1,200 rows: the query has more." in capsys.readouterr().out


def test_a_long_value_is_not_cut_when_the_output_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    value = "x" * 150
    print_rows([{"id": 1, "text": value}], as_json=False)
    assert _cells(capsys.readouterr().out)[1] == ("1", value)


@pytest.fixture
def history(tmp_path: Path) -> tuple[str, list[Manifest]]:
    store = open_store(tmp_path.as_uri())
    committed: list[Manifest] = []
    for _ in range(3):
        committed.append(store.commit(manifest(committed[-1] if committed else None)))
    return tmp_path.as_uri(), committed


def test_checkpoint_ids_are_whole_when_the_output_is_not_a_terminal(
    history: tuple[str, list[Manifest]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri, committed = history
    monkeypatch.setenv("COLUMNS", "80")  # what a pipe or a file got: the table is wider
    assert main(["checkpoints", "list", uri]) == 0
    out = capsys.readouterr().out
    assert "…" not in out and max(len(line) for line in _table(out)) > 80
    listed = _cells(out)[1:]
    assert [row[0] for row in listed] == [m.id for m in reversed(committed)]
    assert [row[1] for row in listed] == [m.parent or "-" for m in reversed(committed)]
    assert main(["checkpoints", "show", uri, listed[-1][0]]) == 0  # the id as printed works
    assert f"Checkpoint {committed[0].id}" in capsys.readouterr().out


@pytest.mark.parametrize("damaged", [0, 1, 2], ids=["oldest", "middle", "latest"])
def test_a_damaged_checkpoint_is_named_and_the_others_still_listed(
    history: tuple[str, list[Manifest]], capsys: pytest.CaptureFixture[str], damaged: int
) -> None:
    """One damaged manifest failed the whole listing, saying to pick an older checkpoint
    with `spindle checkpoints list`: the command that had just failed."""
    uri, committed = history
    bad = committed[damaged]
    (Path(uri.removeprefix("file://")) / "checkpoints" / bad.id / "manifest.json").write_text("{")
    assert main(["checkpoints", "list", uri, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    good = [m.id for m in reversed(committed) if m.id != bad.id]
    assert [entry["id"] for entry in listed if "unreadable" not in entry] == good
    [unreadable] = [entry for entry in listed if "unreadable" in entry]
    assert unreadable["id"] == bad.id and "CheckpointUnreadable" not in unreadable["unreadable"]
    assert main(["checkpoints", "list", uri]) == 0
    out = capsys.readouterr()
    assert f"checkpoint {bad.id} cannot be read" in " ".join(out.err.split())


def test_an_empty_root_says_what_a_pipelines_root_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spindle checkpoints list grades` (a pipeline's name) said only "No checkpoints"."""
    assert main(["checkpoints", "list", str(tmp_path / "grades")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "A pipeline's root is <storage uri>/<namespace>/<name>" in out


def test_checkpoint_ids_are_whole_in_a_narrow_terminal(
    history: tuple[str, list[Manifest]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri, committed = history
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: standard output is a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["checkpoints", "list", uri]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert max(len(line) for line in _table(out)) == 60  # the terminal's width is kept
    assert "…" in out  # other columns are cut to fit, the ids are not
    assert [row[0] for row in _cells(out)[1:]] == [m.id for m in reversed(committed)]


def test_a_change_tables_names_are_whole_when_the_output_is_not_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`spindle diff ... | head` and `spindle plan` in a CI log cut names at 80 columns
    (`customer_transactions_enriched_daily…`); only the checkpoint tables were whole."""
    name = "customer_transactions_enriched_daily_by_region_and_channel"
    table = "create table t (region varchar, channel varchar, amount int);\n"
    old, new = tmp_path / "old.sql", tmp_path / "new.sql"
    old.write_text(table)
    new.write_text(f"{table}create view {name} as select region, channel, amount from t;\n")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "…" not in out and any(name in line for line in _table(out))


def _outputs_program(plus: int) -> str:
    """Table t and views v1..v3, each with an output connector; `plus` is in their queries."""
    out = (
        '[{{"name": "out", "transport": {{"name": "file_output", "config": {{"path": '
        '"/out/v{i}"}}}}, "format": {{"name": "csv"}}}}]'
    )
    return "create table t (a int) with ('materialized' = 'true');\n" + "".join(
        f"create view v{i} with ('connectors' = '{out.format(i=i)}') "
        f"as select a + {plus} as a from t;\n"
        for i in (1, 2, 3)
    )


@pytest.mark.parametrize(
    ("kept", "said"),
    [
        (
            None,  # a status too large: it keeps no list
            [
                "  views to evaluate: 3 views (not kept in the status)",
                "  stored state read: size unknown, of 1 relation (not kept in the status)",
                "  outputs replaced: 3 outputs (not kept in the status)",
            ],
        ),
        (
            1,
            [
                "  views to evaluate: v1 and 2 more (not kept in the status)",
                "  stored state read: size unknown (t)",
                "  outputs replaced: v1.out and 2 more (not kept in the status)",
            ],
        ),
    ],
)
def test_kubectl_spindle_approve_never_says_none_of_a_list_the_status_cut(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kept: int | None,
    said: list[str],
) -> None:
    """A status too large (StatusTooLarge), or of more than 100 entries a list, printed
    "views to evaluate: none" and "outputs replaced: none" above "Not shown: 3 of
    estimate.outputs": what it kept, and how many more it did not."""
    from spindle.cli import kubectl_plugin
    from spindle.lifecycle import conclude, decide
    from spindle.lifecycle.status import bounded, oversized
    from tests.unit.test_lifecycle import checkpoint, observe, spec

    observed = observe(spec=spec(_outputs_program(2)), checkpoint=checkpoint(_outputs_program(1)))
    status = conclude(decide(observed), observed, driver=None, now="t").status
    status = (
        oversized(status, detail="413", previous=None, now="t")
        if kept is None
        else bounded(status, limit=kept)
    )
    pipeline = {"metadata": {"name": "p", "generation": 2}, "status": status.to_json()}
    monkeypatch.setattr(kubectl_plugin, "_pipeline", lambda args: pipeline)
    annotated: list[str] = []
    monkeypatch.setattr(kubectl_plugin, "_annotate", lambda a, key, value: annotated.append(value))
    assert kubectl_plugin.main(["approve", "p", "--yes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for line in said:
        assert line in lines
    assert not [line for line in lines if line.endswith(": none")]
    assert annotated == [status.pending_change.id if status.pending_change else None]


def test_an_emptied_table_whose_rows_are_not_known_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spindle diff` has no statistics: it printed `t (unknown dropped)`."""
    from spindle.cli.render import estimate_lines

    old, new = tmp_path / "old.sql", tmp_path / "new.sql"
    old.write_text("create table t (a int, b int) with ('materialized'='true');\n")
    new.write_text("create table t (a int, b bigint) with ('materialized'='true');\n")
    assert main(["diff", str(old), str(new)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  tables emptied by the change: t (stored rows unknown)" in lines
    assert main(["diff", str(old), str(new), "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)["estimate"]
    estimate["tablesEmptied"] = [{"name": "t", "storedRows": 1204}]
    assert "  tables emptied by the change: t (1,204 stored rows dropped)" in estimate_lines(
        estimate
    )
