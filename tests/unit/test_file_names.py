"""How a file Spark names is matched to the input or state location it belongs to: the name
decides which connector or relation an error blames, so every spelling must agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from spindle.runtime.semantics import decoded_path
from spindle.runtime.storage import within


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/in/a.json", "/in"),
        ("file:/in/a.json", "/in"),
        ("file:///in/a.json", "file:/in/"),
        ("/in/sub/a.json", "file:///in"),
        ("/in/a.json", "/in/a.json"),  # a connector that names one file
        ("s3a://bucket/in/a.json", "s3://bucket/in"),
        ("s3://bucket/in/a.json", "s3a://bucket/in/"),
    ],
)
def test_a_file_under_its_location_is_within_it_however_either_is_spelled(
    path: str, location: str
) -> None:
    assert within(path, location)


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/in2/a.json", "/in"),  # a sibling whose name starts the same
        ("/in", "/in/a.json"),
        ("s3a://other/in/a.json", "s3://bucket/in"),
        ("/bucket/in/a.json", "s3://bucket/in"),
    ],
)
def test_a_file_elsewhere_is_not_within_the_location(path: str, location: str) -> None:
    assert not within(path, location)


@pytest.mark.parametrize(
    ("named", "written"),
    [
        ("file:///in%20box%20%25/a%20b.json", "file:///in box %/a b.json"),  # the file scan's
        ("s3a://b/in/x%3Dy.parquet", "s3a://b/in/x=y.parquet"),
        ("file:/tmp/x sp/a b%.parquet", "file:/tmp/x sp/a b%.parquet"),  # a footer read: raw
        ("file:/tmp/100%/a%41.json", "file:/tmp/100%/a%41.json"),  # a stray % says raw
        ("file:/tmp/plain.json", "file:/tmp/plain.json"),
    ],
)
def test_a_file_spark_names_is_decoded_only_when_it_is_url_encoded(
    named: str, written: str
) -> None:
    assert decoded_path(named) == written


def test_a_relative_location_reaches_spark_from_where_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A served command's Spark runs in the directory its server started in: a relative
    output path's files were written there, listed here, and lost."""
    from spindle.runtime.storage import spark_uri

    monkeypatch.chdir(tmp_path)
    for written in ("out", "./out", "file:out"):
        assert spark_uri(written) == f"file:{tmp_path}/out"
    for absolute in ("/data/out", "file:/data/out", "file:///data/out", "s3a://b/out"):
        assert spark_uri(absolute) == absolute
    assert spark_uri("s3://b/out") == "s3a://b/out"
