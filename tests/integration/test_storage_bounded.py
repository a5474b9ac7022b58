"""Storage stays bounded: after many steps, the bytes under a pipeline's root stay within 1.5x
of what the kept checkpoints need (their manifests and intents, the Delta files of every kept
(path, version), and the Delta log needed to read those versions), and every kept checkpoint
still reads. On a local directory and on the real S3 server."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from spindle.api import PipelineSpec
from spindle.checkpoint import PipelineRef
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.store import CheckpointStore, intent_key, manifest_key, open_store
from spindle.program import parse_program
from spindle.runtime.compaction import Compaction
from spindle.runtime.factory import open_runtime
from spindle.runtime.storage import spark_uri
from tests import soak

KEEP = 3
COMPACT_AT = 3
"""Small files that make a relation compact (`Compaction.small_files`): low, so the few steps
of a CI run compact each appended relation twice."""
_LOG = re.compile(r"_delta_log/(\d{20})\.")
_CHECKPOINT = re.compile(r"_delta_log/(\d{20})\.checkpoint.*\.parquet$")


def program(inputs: Path) -> str:
    source = [
        {
            "name": "src",
            "format": {"name": "json"},
            "transport": {"name": "file_input", "config": {"path": str(inputs)}},
        }
    ]
    return (
        "create table events (id bigint, k int, amount int) with ('materialized' = 'true', "
        f"'connectors' = '{json.dumps(source)}');\n"
        "create materialized view totals as "
        "select k, sum(amount) as total, count(*) as n from events group by k;\n"
        "create materialized view big as select id, amount from events where amount > 50;\n"
    )


@pytest.fixture(params=["file", "s3"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[str, S3Options | None, dict[str, Any]]:
    if request.param == "file":
        return (tmp_path / "storage").as_uri(), None, {}
    s3 = request.getfixturevalue("s3")
    options = S3Options(s3.endpoint, s3.region, s3.access_key, s3.secret_key)
    storage = {"endpoint": s3.endpoint, "region": s3.region}
    return f"s3://{s3.bucket('bounded')}/pipelines", options, storage


def sizes(store: CheckpointStore, options: S3Options | None) -> dict[str, int]:
    """Every object under the pipeline root with its size (hidden checksum files included)."""
    if options is None:
        root = Path(store.uri.removeprefix("file://"))
        return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}
    from spindle.checkpoint.retry import RetryPolicy
    from spindle.checkpoint.s3_store import S3Store, _client

    objects = store.objects
    assert isinstance(objects, S3Store)
    client, found = _client(options, RetryPolicy()), {}
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=objects.bucket, Prefix=objects.prefix + "/"
    ):
        for item in page.get("Contents", []):
            found[item["Key"][len(objects.prefix) + 1 :]] = int(item["Size"])
    return found


def live_keys(spark: Any, store: CheckpointStore, on_disk: dict[str, int]) -> set[str]:
    """What the kept checkpoints need, computed independently of the vacuum: Spark's own list
    of each kept (path, version)'s files, and each table's log from the newest checkpoint at or
    below its oldest kept version."""
    kept = store.history()
    needed = {"latest", *(manifest_key(m.id) for m in kept)}
    needed |= {intent_key(m.sequence) for m in kept}
    oldest: dict[str, int] = {}
    for manifest in kept:
        for record in manifest.state.values():
            uri = spark_uri(f"{store.uri}/{record.path}")
            frame = spark.read.format("delta").option("versionAsOf", record.version).load(uri)
            needed |= {
                f"{record.path}/{f.split(f'/{record.path}/', 1)[1]}" for f in frame.inputFiles()
            }
            oldest[record.path] = min(record.version, oldest.get(record.path, record.version))
    for path, version in oldest.items():
        log = [k for k in on_disk if k.startswith(f"{path}/_delta_log/")]
        checkpoints = [int(m.group(1)) for k in log if (m := _CHECKPOINT.search(k))]
        start = max([c for c in checkpoints if c <= version], default=0)
        needed |= {k for k in log if (m := _LOG.search(k)) and int(m.group(1)) >= start}
        needed.add(f"{path}/_delta_log/_last_checkpoint")
    # a local directory keeps Hadoop's checksum beside each file Spark wrote
    return needed | {
        k
        for k in on_disk
        if (name := k.rsplit("/", 1))[-1].startswith(".")
        and f"{name[0]}/{name[-1][1:].removesuffix('.crc')}" in needed
    }


@pytest.mark.slow
def test_after_many_steps_bytes_on_disk_stay_within_1_5x_of_live_state(
    tmp_path: Path, spark: Any, backend: tuple[str, S3Options | None, dict[str, Any]]
) -> None:
    uri, options, located = backend
    inputs = tmp_path / "in"
    inputs.mkdir()
    spec = PipelineSpec.model_validate(
        {
            "sql": program(inputs),
            "storage": {"uri": uri, **located, "retention": {"checkpoints": KEEP, "minAge": "0"}},
        }
    )
    ref = PipelineRef(namespace="default", name="bounded")
    store = open_store(uri, namespace=ref.namespace, name=ref.name, s3=options)
    reports: list[tuple[str, dict[str, Any]]] = []
    runtime = open_runtime(
        pipeline=ref,
        spec=spec,
        store=store,
        s3=options,
        report=lambda event, **fields: reports.append((event, fields)),
    )
    runtime.compaction = Compaction(small_files=COMPACT_AT)
    compiled = parse_program(spec.sql)
    checkpoint = runtime.initialize(compiled)
    steps = soak.count(ci=6, soak=200)
    for step in range(steps):
        rows = [
            {"id": step * 10 + j, "k": j % 3, "amount": (step * 7 + j * 13) % 100}
            for j in range(10)
        ]
        (inputs / f"{step:05d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        checkpoint, stats = runtime.step(compiled, checkpoint)
        assert not stats.idle
    assert not [r for r in reports if r[0] == "vacuum-failed"], reports

    on_disk = sizes(store, options)
    needed = live_keys(spark, store, on_disk)
    live = sum(size for key, size in on_disk.items() if key in needed)
    total = sum(on_disk.values())
    print(
        f"\n{'file' if options is None else 's3'}: {steps} steps, {len(on_disk)} objects, "
        f"{total} bytes on disk, {live} bytes live (kept {KEEP} checkpoints), "
        f"ratio {total / live:.3f}"
    )
    kept = store.history()
    assert [m.sequence for m in kept] == list(range(steps, steps - KEEP, -1))
    assert len([k for k in on_disk if k.startswith("checkpoints/") and "/." not in k]) == KEEP
    for manifest in kept:  # every kept checkpoint still reads, at exactly its versions
        for record in manifest.state.values():
            uri = spark_uri(f"{store.uri}/{record.path}")
            frame = spark.read.format("delta").option("versionAsOf", record.version).load(uri)
            assert frame.count() == record.rows
    assert manifest.state["events"].rows == (steps - KEEP + 1) * 10
    compacted = {fields["relation"] for event, fields in reports if event == "compacted"}
    assert compacted >= {"events", "big"}, reports  # the relations every step appends to
    for manifest in kept:  # however many steps ran, a relation stays a few files
        for name, record in manifest.state.items():
            uri = spark_uri(f"{store.uri}/{record.path}")
            files = spark.read.format("delta").option("versionAsOf", record.version).load(uri)
            assert len(files.inputFiles()) <= COMPACT_AT, f"{name}: {files.inputFiles()}"
    assert total <= 1.5 * live
    assert os.environ.get("SPINDLE_SOAK") != "1" or steps == 200


def test_checkpoints_older_than_a_week_still_read_roll_back_and_vacuum(
    tmp_path: Path, spark: Any
) -> None:
    """Delta refuses to read a version but the latest whose commit is older than its deleted-
    file retention (7 days) unless told not to: a pipeline whose kept checkpoints spanned a
    week could not restart from them, roll a failed step back, or vacuum."""
    from spindle.runtime import storage

    inputs = tmp_path / "in"
    inputs.mkdir()
    uri = (tmp_path / "storage").as_uri()
    retention = {"checkpoints": 4, "minAge": "0"}
    spec = PipelineSpec.model_validate(
        {"sql": program(inputs), "storage": {"uri": uri, "retention": retention}}
    )
    ref = PipelineRef(namespace="default", name="aged")
    store = open_store(uri, namespace=ref.namespace, name=ref.name)
    reports: list[tuple[str, dict[str, Any]]] = []
    runtime = open_runtime(
        pipeline=ref,
        spec=spec,
        store=store,
        s3=None,
        report=lambda event, **fields: reports.append((event, fields)),
    )
    compiled = parse_program(spec.sql)
    checkpoint = runtime.initialize(compiled)
    for step in range(4):
        if step == 3:  # the first three steps' commits are eight days old
            week_ago = os.path.getmtime(inputs) - 8 * 86400
            for log in (tmp_path / "storage").rglob("_delta_log/*"):
                os.utime(log, (week_ago, week_ago))
        row = {"id": step, "k": step % 2, "amount": 60 + step}
        (inputs / f"{step:05d}.json").write_text(json.dumps(row) + "\n")
        checkpoint, _ = runtime.step(compiled, checkpoint)
    assert not [r for r in reports if r[0] == "vacuum-failed"], reports
    kept = store.history()
    assert len(kept) == 4
    for manifest in kept:
        for record in manifest.state.values():
            path = spark_uri(f"{store.uri}/{record.path}")
            frame = spark.read.format("delta").option("versionAsOf", record.version).load(path)
            assert frame.count() == record.rows
    oldest = kept[-1].state["events"]
    assert storage.restore(spark, spark_uri(f"{store.uri}/{oldest.path}"), oldest.version)
