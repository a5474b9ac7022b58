"""When a relation is compacted: the small files a Delta commit adds, net of those it removes;
when a Z-set relation is consolidated instead."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.runtime.compaction import (
    SMALL_BYTES,
    consolidates,
    files_changed,
    small_files_added,
)


def add(size: int) -> dict[str, Any]:
    return {"add": {"path": "part-0.parquet", "size": size, "dataChange": True}}


def remove(size: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"path": "part-0.parquet", "dataChange": True}
    if size is not None:
        body["size"] = size
    return {"remove": body}


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        pytest.param([{"commitInfo": {}}, add(900)], 1, id="an append adds one small file"),
        pytest.param([add(900), add(SMALL_BYTES)], 1, id="a file of SMALL_BYTES is not small"),
        pytest.param([remove(900), add(950)], 0, id="a MERGE that rewrites its one file"),
        pytest.param([remove(None), add(950)], 0, id="a remove without a size counts as small"),
        pytest.param([remove(SMALL_BYTES * 2), add(10)], 1, id="a large file rewritten small"),
        pytest.param([remove(9), remove(9), add(SMALL_BYTES * 3)], -2, id="a compaction"),
        pytest.param([{"metaData": {}}, {"protocol": {}}], 0, id="no files"),
    ],
)
def test_small_files_a_commit_adds(actions: list[dict[str, Any]], expected: int) -> None:
    assert small_files_added(actions) == expected


@pytest.mark.parametrize(
    ("stored", "live", "expected"),
    [
        pytest.param(100, 100, False, id="nothing cancelled"),
        pytest.param(150, 100, False, id="a third cancelled is the threshold, not past it"),
        pytest.param(151, 100, True, id="past a third cancelled"),
        pytest.param(2, 0, True, id="everything cancelled"),
        pytest.param(0, 0, False, id="empty"),
        pytest.param(10, 40, False, id="weights above one: fewer stored rows than live ones"),
    ],
)
def test_a_z_set_consolidates_once_a_third_of_what_it_stores_has_cancelled(
    stored: int, live: int, expected: bool
) -> None:
    assert consolidates(stored=stored, live=live) is expected


def test_the_files_a_commit_replaces() -> None:
    assert files_changed([{"commitInfo": {}}, remove(9), remove(None), add(30)]) == (2, 1)
