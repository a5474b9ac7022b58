"""The checkpoint store on both backends: a local directory and the real S3 server."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spindle.checkpoint import FORMAT_VERSION, PipelineRef, load_manifest
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.origin import starting_checkpoint
from spindle.checkpoint.retry import RetryPolicy
from spindle.checkpoint.store import manifest_key, open_store
from spindle.errors import SpindleError
from tests import soak
from tests.checkpoints import manifest
from tests.harness.fault_proxy import FaultProxy


@pytest.fixture(params=["file", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """(pipeline root URI, environment a child process needs to reach it)."""
    if request.param == "file":
        yield (tmp_path / "store" / "default" / "grades").as_uri(), {}
    else:
        s3 = request.getfixturevalue("s3")
        yield f"s3://{s3.bucket()}/pipelines/default/grades", s3.env()


def store_for(uri: str, env: dict[str, str], **kwargs: Any) -> Any:
    return open_store(uri, s3=S3Options.from_env(env) if env else None, **kwargs)


def test_empty_store_has_no_latest(backend: tuple[str, dict[str, str]]) -> None:
    store = store_for(*backend)
    assert store.latest() is None
    assert store.history() == []


def test_commits_form_a_chain(backend: tuple[str, dict[str, str]]) -> None:
    store = store_for(*backend)
    first = store.commit(manifest(None))
    second = store.commit(manifest(first, offset=1))
    third = store.commit(manifest(second, offset=2))
    assert [m.id for m in store.history()] == [third.id, second.id, first.id]
    reread = store_for(*backend)
    assert reread.latest() == third
    assert reread.get(first.id) == first


def test_retention_deletes_the_scratch_a_preview_that_never_ended_left(
    backend: tuple[str, dict[str, str]],
) -> None:
    """A preview deletes its scratch when it ends; one killed midway (evicted, OOM-killed, its
    node lost) left whole evaluated views there for good, outside what the vacuum counts."""
    import datetime

    store = store_for(*backend)
    latest = store.commit(manifest(None))
    left = ["scratch/preview-a/views/v@0/part-0.parquet", "scratch/preview-a/views/v@0/x.json"]
    for key in left:
        store.objects.write(key, b"rows")
    written = max(i.modified for i in store.objects.scan("scratch/"))
    day = datetime.timedelta(days=1)

    def retire(at: datetime.datetime) -> list[str]:
        store.retire(latest, checkpoints=1, min_age=datetime.timedelta(0), now=at)
        return sorted(i.key for i in store.objects.scan("scratch/"))

    assert retire(written + day - datetime.timedelta(minutes=1)) == sorted(left)  # may be live
    assert retire(written + day) == []
    assert store.latest() == latest


def test_a_preview_scratch_location_written_to_within_a_day_is_kept_whole(tmp_path: Path) -> None:
    """A long preview writes its views one after another: its first files are old, its
    location is not."""
    import datetime

    store = open_store((tmp_path / "store").as_uri())
    latest = store.commit(manifest(None))
    old, new = "scratch/preview-b/views/v@0/a.parquet", "scratch/preview-b/views/w@0/b.parquet"
    store.objects.write(old, b"rows")
    store.objects.write(new, b"rows")
    two_days_ago = time.time() - 2 * 86400
    os.utime(tmp_path / "store" / old, (two_days_ago, two_days_ago))
    gone = "scratch/preview-c/views/v@0/c.parquet"  # another preview's, killed two days ago
    store.objects.write(gone, b"rows")
    os.utime(tmp_path / "store" / gone, (two_days_ago, two_days_ago))
    store.retire(latest, checkpoints=1, min_age=datetime.timedelta(0))
    assert sorted(i.key for i in store.objects.scan("scratch/")) == [old, new]


def test_stale_parent_is_a_conflict_and_overwrites_nothing(
    backend: tuple[str, dict[str, str]],
) -> None:
    writer, other = store_for(*backend), store_for(*backend)
    base = writer.commit(manifest(None))
    assert other.latest() == base
    winner = writer.commit(manifest(base, offset=1))
    with pytest.raises(SpindleError) as conflict:
        other.commit(manifest(base, offset=2))
    assert conflict.value.reason == "CheckpointConflict"
    assert conflict.value.details["winner"] == winner.id
    assert backend[0] in conflict.value.message
    assert store_for(*backend).latest() == winner


def test_missing_checkpoint_is_not_found(backend: tuple[str, dict[str, str]]) -> None:
    with pytest.raises(SpindleError) as missing:
        store_for(*backend).get("00000042-abcdef")
    assert missing.value.reason == "CheckpointNotFound"
    assert missing.value.details["uri"] == backend[0]


def test_corrupt_and_future_manifests_are_refused_clearly(
    backend: tuple[str, dict[str, str]],
) -> None:
    store = store_for(*backend)
    good = manifest(None)
    store.commit(good)
    document = json.loads(good.to_json())
    store.objects.write(manifest_key("00000001-badbad"), b"{not json")
    with pytest.raises(SpindleError) as corrupt:
        store.get("00000001-badbad")
    assert corrupt.value.reason == "CheckpointUnreadable"
    store.objects.write(
        manifest_key("00000001-future"), json.dumps({**document, "format_version": 99}).encode()
    )
    with pytest.raises(SpindleError) as future:
        store.get("00000001-future")
    assert future.value.reason == "CheckpointFormatUnsupported"
    assert "Upgrade Spindle" in future.value.message
    old = Path("tests/golden/manifests/v1-file-input-list.json").read_bytes()
    mixed = json.loads(old)
    mixed["connectors"]["grades.src"]["offset"] = ["a.json", 7]  # a format 1 list, corrupted
    store.objects.write(manifest_key("00000001-oldbad"), json.dumps(mixed).encode())
    with pytest.raises(SpindleError) as shape:
        store.get("00000001-oldbad")
    assert shape.value.reason == "CheckpointUnreadable"
    assert "format 1 does not have its shape" in shape.value.message


def test_a_corrupt_intent_is_refused_with_what_to_do(backend: tuple[str, dict[str, str]]) -> None:
    """A step's replay reads its intent back: a garbled one was a JSON traceback, and one of
    another shape a `TypeError` midway through the step."""
    store = store_for(*backend)
    assert store.record_intent(3, {"offsets": {"t.c": 1}}) == ({"offsets": {"t.c": 1}}, False)
    assert store.record_intent(3, {"offsets": {"t.c": 2}}) == ({"offsets": {"t.c": 1}}, True)
    for garbled in (b"{not json", b"[1, 2]", b'{"offsets": [1]}'):
        store.objects.write("intents/00000004.json", garbled)
        with pytest.raises(SpindleError) as corrupt:
            store.record_intent(4, {"offsets": {}})
        assert corrupt.value.reason == "CheckpointUnreadable"
        assert "intent of step 4" in corrupt.value.message and "delete it" in corrupt.value.message


def test_a_commit_after_latest_was_removed_under_the_store_is_a_conflict(
    backend: tuple[str, dict[str, str]],
) -> None:
    """The store remembers the pointer it read; the S3 server answers a write conditional on
    an object that is gone with 404, which was a traceback there and a conflict on disk."""
    store = store_for(*backend)
    first = store.commit(manifest(None))
    store_for(*backend).objects.delete(["latest"])
    with pytest.raises(SpindleError) as conflict:
        store.commit(manifest(first, offset=1))
    assert conflict.value.reason == "CheckpointConflict"


CRASH_CHILD = """
import sys
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.store import open_store
from tests.checkpoints import manifest
uri = sys.argv[1]
store = open_store(uri, s3=S3Options.from_env())
current = store.latest()
print("ready", flush=True)
offset = 0
while True:
    offset += 1
    nxt = manifest(current, offset=offset)
    for relation, record in nxt.state.items():
        store.objects.write(record.path + "/part-0.parquet", b"x" * 2048)
    current = store.commit(nxt)
    print(current.id, flush=True)
"""


def test_kill_9_at_random_points_never_leaves_a_partial_checkpoint(
    backend: tuple[str, dict[str, str]],
) -> None:
    uri, env = backend
    store_for(uri, env).commit(manifest(None))
    rng = random.Random(20261122)
    child_env = {**os.environ, **env, "PYTHONPATH": str(Path.cwd())}
    runs_with_commits = 0
    runs = soak.count(ci=20, soak=50)
    for run in range(runs):
        before = store_for(uri, env).latest()
        assert before is not None
        child = subprocess.Popen(
            [sys.executable, "-c", CRASH_CHILD, uri],
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        # Past start-up (whose length depends on the machine's load), into the commit loop.
        assert child.stdout.readline() == "ready\n", child.stderr
        time.sleep(rng.uniform(0.1, 0.7))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate()
        committed = out.split()
        runs_with_commits += bool(committed)
        after = store_for(uri, env).latest()
        assert after is not None, f"run {run}: latest vanished\n{err}"
        assert after.sequence >= before.sequence
        if committed:
            # the last id printed was published; at most one more may have been
            assert after.id == committed[-1] or after.parent == committed[-1]
        # A commit the child had sent before the kill may still land (object storage completes
        # a request whose client died): the chain may have grown by that one, whole.
        chain = store_for(uri, env).history()
        head = chain[0].sequence
        assert head in (after.sequence, after.sequence + 1), f"run {run}: {head} after {after}"
        assert [m.sequence for m in chain] == list(range(head, -1, -1))
    # the kills really landed mid-loop, not before it started
    assert runs_with_commits >= runs // 2, f"{runs_with_commits} of {runs} runs committed"


RACE_CHILD = """
import sys, time, json
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.store import open_store
from spindle.errors import SpindleError
from tests.checkpoints import manifest
uri, go, parent_id = sys.argv[1], float(sys.argv[2]), sys.argv[3]
store = open_store(uri, s3=S3Options.from_env())
parent = store.get(parent_id)  # named, not read as the latest: a child slow to start (a busy
# machine) would otherwise read the other's commit as its parent, and both would win
store.self_test()
candidate = manifest(parent, offset=7)
waited = go > time.time()
time.sleep(max(0.0, go - time.time()))
try:
    store.commit(candidate)
    print(json.dumps({"won": candidate.id, "waited": waited}))
except SpindleError as error:
    said = {"lost": error.reason, "winner": error.details.get("winner"), "waited": waited}
    print(json.dumps(said))
"""


def test_concurrent_commits_from_one_parent_have_exactly_one_winner(
    backend: tuple[str, dict[str, str]],
) -> None:
    uri, env = backend
    store_for(uri, env).commit(manifest(None))
    child_env = {**os.environ, **env, "PYTHONPATH": str(Path.cwd())}
    raced, start = 0, 2.5
    for _ in range(5):
        go, parent = time.time() + start, store_for(uri, env).latest()
        children = [
            subprocess.Popen(
                [sys.executable, "-c", RACE_CHILD, uri, str(go), parent.id],
                env=child_env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        results = [json.loads(c.communicate(timeout=60)[0]) for c in children]
        winners = [r["won"] for r in results if "won" in r]
        losers = [r for r in results if "lost" in r]
        assert len(winners) == 1, results
        assert losers[0]["lost"] == "CheckpointConflict"
        assert losers[0]["winner"] == winners[0]
        assert store_for(uri, env).latest().id == winners[0]
        both = all(r["waited"] for r in results)
        raced += both
        start = start if both else min(2 * start, 20.0)  # a busy machine: more time to start
    assert raced, "no round had both children ready before the start: none was a race"


def test_golden_manifests_of_every_released_format_load() -> None:
    golden = sorted(Path("tests/golden/manifests").glob("v*.json"))
    assert [p.name for p in golden] == [
        "v1-file-input-list.json",
        "v1.json",
        "v2.json",
        "v3.json",
        "v4.json",
        "v5.json",
    ]
    for path in golden:
        loaded = load_manifest(path.read_bytes(), uri=str(path))
        assert loaded.format_version == FORMAT_VERSION
        assert loaded.program.text.startswith("create table students")
        assert loaded.state["grades"].version == 3 or path.name.startswith("v1-")


def test_format_1_file_input_offsets_migrate_to_a_mark_and_the_files_seen() -> None:
    path = Path("tests/golden/manifests/v1-file-input-list.json")
    loaded = load_manifest(path.read_bytes(), uri=str(path))
    files = [f"file:/data/grades/{i:03d}.json" for i in range(3)]
    assert loaded.connectors["grades.src"].offset == {"mark": None, "seen": files}
    assert loaded.connectors["students.lake"].offset == 7  # delta versions stay as they were
    assert loaded.connectors["grades.__adhoc__"].offset is None
    v2 = load_manifest(Path("tests/golden/manifests/v2.json").read_bytes(), uri="v2.json")
    assert v2.connectors["grades.src"].offset == {
        "mark": 1795842000000,
        "seen": ["file:/data/grades/003.json"],
    }


def test_format_3_records_throughput_and_older_formats_have_none() -> None:
    v2 = load_manifest(Path("tests/golden/manifests/v2.json").read_bytes(), uri="v2.json")
    assert v2.throughput == {} and v2.restated is None
    v3 = load_manifest(Path("tests/golden/manifests/v3.json").read_bytes(), uri="v3.json")
    assert v3.throughput["bootstrap"].rows == 10 and v3.throughput["step"].seconds == 4.2
    assert v3.restated == "avg_grade"


def test_format_4_records_the_translation_and_older_formats_say_revision_0() -> None:
    """State computed before calls were written for Spark as written (`spark_calls`) is
    known by its revision, 0, so the plan can report the views whose values it changes."""
    v3 = load_manifest(Path("tests/golden/manifests/v3.json").read_bytes(), uri="v3.json")
    v4 = load_manifest(Path("tests/golden/manifests/v4.json").read_bytes(), uri="v4.json")
    assert (v3.translation_revision, v4.translation_revision) == (0, 1)


def test_format_5_records_the_incarnation_and_older_formats_have_none() -> None:
    """A pipeline whose checkpoints predate format 5 keeps writing to its Delta outputs as
    the writer it was: its incarnation stays None, and its later checkpoints carry that."""
    v4 = load_manifest(Path("tests/golden/manifests/v4.json").read_bytes(), uri="v4.json")
    v5 = load_manifest(Path("tests/golden/manifests/v5.json").read_bytes(), uri="v5.json")
    assert (v4.incarnation, v5.incarnation) == (None, "5f0c2a9e71d4")


# -- faults: a proxy between the store and the real S3 server ------------------------------------


@pytest.fixture
def faulty(s3: Any) -> Iterator[tuple[FaultProxy, str, S3Options]]:
    proxy = FaultProxy(s3.endpoint).start()
    options = S3Options(proxy.endpoint, s3.region, s3.access_key, s3.secret_key)
    try:
        yield proxy, f"s3://{s3.bucket()}/p/default/grades", options
    finally:
        proxy.stop()


def test_transient_faults_are_retried(faulty: tuple[FaultProxy, str, S3Options]) -> None:
    proxy, uri, options = faulty
    store = open_store(uri, s3=options, retry=RetryPolicy(deadline=20, first_delay=0.05))
    first = store.commit(manifest(None))
    proxy.plan.extend(["503", "drop", "slow:0.5", "503", "ok"])
    second = store.commit(manifest(first, offset=1))
    assert store.latest() == second
    faults = [line.split()[0] for line in proxy.seen]
    assert {"503", "drop", "slow:0.5"} <= set(faults)


def test_an_unchanged_pointer_is_answered_not_modified_and_a_new_one_is_read(
    faulty: tuple[FaultProxy, str, S3Options],
) -> None:
    """The operator asks each pipeline's store for its latest checkpoint at every reconcile: the
    real S3 server answers 304 to `If-None-Match` while the pointer stays, so the manifest is
    not read again; a commit by another writer (the driver) is seen at once."""
    proxy, uri, options = faulty
    operator, driver = open_store(uri, s3=options), open_store(uri, s3=options)
    first = driver.commit(manifest(None))
    assert operator.latest() == first
    proxy.seen.clear()
    assert operator.latest() == first
    [request] = proxy.seen  # the pointer, answered 304; no manifest read
    assert request.startswith("ok GET ") and request.endswith("/latest")
    second = driver.commit(manifest(first, offset=1))
    assert operator.latest() == second


def test_persistent_failure_ends_clearly_and_corrupts_nothing(
    faulty: tuple[FaultProxy, str, S3Options],
) -> None:
    proxy, uri, options = faulty
    store = open_store(uri, s3=options, retry=RetryPolicy(deadline=2, first_delay=0.05))
    first = store.commit(manifest(None))
    proxy.default = "503"
    started = time.monotonic()
    with pytest.raises(SpindleError) as unavailable:
        store.commit(manifest(first, offset=1))
    assert time.monotonic() - started < 10
    assert unavailable.value.reason == "StorageUnavailable"
    assert uri in unavailable.value.message
    proxy.default = "ok"
    assert open_store(uri, s3=options).latest() == first


def test_a_start_from_store_that_hangs_is_given_up_within_the_callers_bound(
    faulty: tuple[FaultProxy, str, S3Options], tmp_path: Path
) -> None:
    """The operator reads a `startFrom` origin with its own 8-second bound, not the default
    30: an origin that accepts requests and never answers ends the read as it ends its own."""
    proxy, uri, options = faulty
    open_store(uri, s3=options).commit(manifest(None))
    proxy.default = "slow:3600"
    bound = RetryPolicy(deadline=1.0, first_delay=0.05, connect_timeout=0.5, read_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(SpindleError) as unavailable:
        starting_checkpoint(
            open_store(tmp_path.as_uri()),  # no checkpoint of its own yet
            start_from=uri,
            pipeline=PipelineRef(namespace="default", name="copy"),
            s3=options,
            adopt=False,
            retry=bound,
        )
    assert time.monotonic() - started < 10  # the default bound alone is 30 s
    assert unavailable.value.reason == "StorageUnavailable" and uri in unavailable.value.message
    proxy.default = "ok"


def test_client_errors_are_not_retried(s3: Any) -> None:
    options = S3Options(s3.endpoint, s3.region, s3.access_key, "wrong-secret")
    proxy_free = open_store(
        f"s3://{s3.bucket()}/p/default/grades", s3=options, retry=RetryPolicy(deadline=30)
    )
    started = time.monotonic()
    with pytest.raises(SpindleError) as rejected:
        proxy_free.latest()
    assert time.monotonic() - started < 5
    assert rejected.value.reason == "StorageRequestRejected"
    assert rejected.value.details["status"] == 403


def test_a_bucket_that_does_not_exist_is_named_not_taken_for_no_checkpoint(s3: Any) -> None:
    """A missing bucket read as "no checkpoint": the operator started the pipeline afresh."""
    options = S3Options(s3.endpoint, s3.region, s3.access_key, s3.secret_key)
    missing = open_store("s3://no-such-bucket-here/p/default/grades", s3=options)
    for call in (missing.latest, missing.history):
        with pytest.raises(SpindleError) as raised:
            call()
        assert raised.value.reason == "StorageBucketNotFound"
        assert "'no-such-bucket-here' does not exist" in raised.value.message


def test_a_store_without_conditional_writes_is_refused(s3: Any) -> None:
    proxy = FaultProxy(
        s3.endpoint,
        strip_conditions=True,
        credentials=(s3.access_key, s3.secret_key, s3.region),
    ).start()
    try:
        options = S3Options(proxy.endpoint, s3.region, s3.access_key, s3.secret_key)
        store = open_store(f"s3://{s3.bucket()}/p/default/grades", s3=options)
        with pytest.raises(SpindleError) as refused:
            store.commit(manifest(None))
        assert refused.value.reason == "ConditionalWritesUnsupported"
        assert store.latest() is None
        with pytest.raises(SpindleError) as refused:  # a first start asks for it first
            store.incarnation()
        assert refused.value.reason == "ConditionalWritesUnsupported"
        assert not store.objects.scan("")  # no incarnation made that another could overwrite
    finally:
        proxy.stop()


def test_cli_lists_and_shows_checkpoints(backend: tuple[str, dict[str, str]]) -> None:
    uri, env = backend
    store = store_for(uri, env)
    first = store.commit(manifest(None))
    second = store.commit(manifest(first, offset=1))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "spindle.cli.main", "checkpoints", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            check=False,
        )

    listed = run("list", uri, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [c["id"] for c in json.loads(listed.stdout)] == [second.id, first.id]
    shown = run("show", uri, first.id, "--json")
    assert json.loads(shown.stdout)["id"] == first.id
    readable = run("show", uri)
    assert second.id in readable.stdout and "create table students" in readable.stdout
    missing = run("show", uri, "00000099-000000", "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error_code"] == "CheckpointNotFound"


def test_adopting_another_pipelines_checkpoint_names_its_state_by_uri(
    backend: tuple[str, dict[str, str]],
) -> None:
    from spindle.checkpoint import PipelineRef

    uri, env = backend
    source = store_for(uri, env)
    first = source.commit(manifest(None))
    second = source.commit(manifest(first, offset=1))
    target_uri = uri.rsplit("/", 1)[0] + "/copy"
    target = store_for(target_uri, env)
    adopted = target.adopt(source, first.id, pipeline=PipelineRef(namespace="default", name="copy"))
    assert adopted.origin == f"{source.uri}#{first.id}"
    assert adopted.parent is None and adopted.sequence == 0
    assert adopted.program == first.program and adopted.connectors == first.connectors
    assert adopted.state["grades"].path == f"{source.uri}/{first.state['grades'].path}"
    assert target.latest() == adopted
    assert source.latest() == second  # the source is only read


def test_a_storage_keeps_one_incarnation_and_an_adopting_pipeline_takes_its_own(
    backend: tuple[str, dict[str, str]],
) -> None:
    """The incarnation names a pipeline's writes to its Delta outputs: a first start that
    crashed and runs again must write as the same one, and a pipeline made again over new
    storage, or started from another's checkpoint, as another."""
    from spindle.checkpoint import PipelineRef

    uri, env = backend
    source = store_for(uri, env)
    made = source.incarnation()
    assert made.isalnum() and store_for(uri, env).incarnation() == made  # asked again: the same
    first = source.commit(manifest(None).model_copy(update={"incarnation": made}))
    assert source.commit(manifest(first, offset=1)).incarnation == made  # carried forward
    target = store_for(uri.rsplit("/", 1)[0] + "/copy", env)
    adopted = target.adopt(source, first.id, pipeline=PipelineRef(namespace="default", name="copy"))
    assert adopted.incarnation == target.incarnation() != made
    source.objects.write("incarnation", b"../not-an-id")
    with pytest.raises(SpindleError) as corrupt:
        source.incarnation()
    assert corrupt.value.reason == "CheckpointUnreadable"
