"""When a relation is compacted: the small files a Delta commit adds, net of those it removes."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.runtime.compaction import SMALL_BYTES, small_files_added


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
