"""A file input's listing, which every step of a long-running pipeline repeats over every file it
has ever ingested: on a local directory and on the real S3 server, it names the same files with
the same modification times as Hadoop's own per-file listing (the names input offsets store),
skips hidden files and directories, and reads a status's time from its text only where that
text has Hadoop's form."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from spindle.runtime import storage

NAMES = [
    "a.json",
    "day=1/b.json",
    "we ird; path=x; modification_time=5, {}/c d%2F.json",
    "deep/er/e.json",
    "_SUCCESS",
    ".a.json.crc",
    "_temporary/0/part-0.json",
    ".staging/f.json",
    "deep/_tmp/g.json",
]
VISIBLE = {"a.json", "day=1/b.json", "we ird; path=x; modification_time=5, {}/c d%2F.json"}
VISIBLE |= {"deep/er/e.json"}


def per_file(spark: Any, uri: str) -> list[tuple[str, int]]:
    """Hadoop's listing, asked file by file (what `list_status` did before), hidden files
    skipped by their path under the root."""
    fs, path = storage._fs(spark, uri)
    root = fs.makeQualified(path).toString().rstrip("/")
    found, files = [], fs.listFiles(path, True)
    while files.hasNext():
        status = files.next()
        name = status.getPath().toString()
        if not storage._hidden(name[len(root) :]):
            found.append((name, int(status.getModificationTime())))
    return sorted(found)


def test_a_local_listing_is_hadoops_own_and_skips_hidden_files(tmp_path: Path, spark: Any) -> None:
    # a hidden name above the root hides nothing under it; `#` and `?` are part of a path's
    # name for Hadoop (no fragment, no query), and so for the listing
    root = tmp_path / "_in#box ?x"
    for number, name in enumerate(NAMES):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
        os.utime(path, ns=(1_000_000_123_456_789 + number, 1_000_000_123_456_789 + number))
    (root / "linked").symlink_to(root / "deep")
    expected = per_file(spark, str(root))
    listed = {name.removeprefix(f"file:{root}/") for name, _ in expected}
    assert listed == VISIBLE | {"linked/er/e.json"}
    assert {mtime for _, mtime in expected} == {1_000_000_123}  # milliseconds, truncated
    for uri in (str(root), f"file://{root}", f"file:{root}/"):
        assert storage.list_status(spark, uri) == expected, uri
    assert storage.list_status(spark, (tmp_path / "absent").as_uri()) == []


def test_an_s3_listing_is_hadoops_own_read_in_one_go(spark: Any, s3: Any) -> None:
    bucket = s3.bucket("listing")
    client = s3.client()
    for name in NAMES:
        client.put_object(Bucket=bucket, Key=f"inbox/{name}", Body=b"{}\n")
    uri = f"s3a://{bucket}/inbox"
    expected = per_file(spark, uri)
    assert {name.removeprefix(f"{uri}/") for name, _ in expected} == VISIBLE
    assert storage.list_status(spark, uri) == expected
    # the times came from each status's text, not from a call per file
    fs, path = storage._fs(spark, uri)
    for status in storage._statuses(spark, fs.listFiles(path, True)):
        name = status.getPath().toString()
        assert storage._modified(name, str(status.toString())) == status.getModificationTime()
    assert storage.list_status(spark, f"s3a://{bucket}/absent") == []


def test_a_delta_tables_version_and_commits_are_read_from_its_log_on_either_store(
    tmp_path: Path, spark: Any, s3: Any
) -> None:
    bucket = s3.bucket("version")
    for uri in (str(tmp_path / "t"), (tmp_path / "u").as_uri(), f"s3a://{bucket}/t"):
        assert storage.delta_version(spark, uri) == -1
        assert storage.commit_actions(spark, uri, 0) is None
        for _ in range(3):
            spark.range(2).write.format("delta").mode("append").save(uri)
        assert storage.delta_version(spark, uri) == 2, uri
        assert storage.last_write(spark, uri) == (2, 2), uri
        actions = storage.commit_actions(spark, uri, 1)
        assert actions is not None and [a for a in actions if "add" in a], uri
        assert storage.commit_actions(spark, uri, 3) is None, uri
