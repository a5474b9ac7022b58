"""The checkpoint store on its file backend (the embedded default), with no server: commits
form a chain, a stale parent is a conflict that overwrites nothing, adopted state is read by URI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spindle.checkpoint import PipelineRef
from spindle.checkpoint.objects import open_objects
from spindle.checkpoint.origin import starting_checkpoint
from spindle.checkpoint.statistics import stored_sizes
from spindle.checkpoint.store import open_store, pipeline_root
from spindle.errors import SpindleError
from tests.checkpoints import manifest


def test_commits_form_a_chain_and_latest_follows_them(tmp_path: Path) -> None:
    store = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    assert store.latest() is None
    first = store.commit(manifest(None))
    second = store.commit(manifest(first, offset=1))
    assert store.latest() == second
    assert [m.id for m in store.history()] == [second.id, first.id]
    assert store.manifest_uri(second.id) == (
        f"{tmp_path.resolve().as_uri()}/default/grades/checkpoints/{second.id}/manifest.json"
    )
    assert Path(store.manifest_uri(second.id).removeprefix("file://")).exists()


def test_a_stale_parent_is_a_conflict_naming_the_winner(tmp_path: Path) -> None:
    store = open_store(tmp_path.as_uri())
    first = store.commit(manifest(None))
    winner = store.commit(manifest(first, offset=1))
    loser = manifest(first, offset=2)
    with pytest.raises(SpindleError) as conflict:
        open_store(tmp_path.as_uri()).commit(loser)
    assert conflict.value.reason == "CheckpointConflict"
    assert conflict.value.details["winner"] == winner.id
    assert store.latest() == winner


def test_a_commit_done_again_is_no_conflict_but_another_manifest_under_its_id_is(
    tmp_path: Path,
) -> None:
    """A commit whose answer was lost is retried (by the store, or by a driver retrying its
    step): it finds its own manifest and pointer and succeeds, from this process or another;
    different contents under the same id still conflict."""
    store = open_store(tmp_path.as_uri())
    first = store.commit(manifest(None))
    second = manifest(first, offset=1)
    assert store.commit(second) == second
    assert store.commit(second) == second  # its pointer already names it
    assert open_store(tmp_path.as_uri()).commit(second) == second  # stale pointer: re-read
    assert store.latest() == second
    impostor = second.model_copy(update={"sequence": 7})
    with pytest.raises(SpindleError) as conflict:
        open_store(tmp_path.as_uri()).commit(impostor)
    assert conflict.value.reason == "CheckpointConflict"
    assert "already exists" in conflict.value.message
    stale = open_store(tmp_path.as_uri())
    assert stale.latest() == second
    third = store.commit(manifest(second, offset=2))
    with pytest.raises(SpindleError) as superseded:  # its cached pointer names second, but
        stale.commit(second)  # the latest is third: second was published, and is no more
    assert superseded.value.details["winner"] == third.id
    assert stale.latest() == third


def test_adopted_state_is_named_by_uri_and_marked_adopted(tmp_path: Path) -> None:
    origin = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    source = origin.commit(manifest(None))
    copy = open_store(tmp_path.as_uri(), namespace="default", name="copy")
    adopted = copy.adopt(origin, source.id, pipeline=PipelineRef(namespace="default", name="copy"))
    state = adopted.state["grades"]
    assert state.adopted and state.path.startswith(origin.uri)
    assert not source.state["grades"].adopted
    assert adopted.origin == f"{origin.uri}#{source.id}"


def test_the_sizes_of_a_start_from_checkpoint_are_read_where_its_state_lives(
    tmp_path: Path,
) -> None:
    """Before the first checkpoint of a `startFrom` pipeline, the estimate read the source's
    state under the new pipeline's root: every size unknown."""
    origin = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    source = origin.commit(manifest(None))
    log = Path(origin.uri.removeprefix("file://")) / source.state["grades"].path / "_delta_log"
    log.mkdir(parents=True)
    stats = json.dumps({"numRecords": 42})
    added = {"add": {"path": "a.parquet", "size": 100, "stats": stats}}
    (log / f"{source.state['grades'].version:020d}.json").write_text(json.dumps(added) + "\n")
    copy = open_store(tmp_path.as_uri(), namespace="default", name="copy")
    start = starting_checkpoint(
        copy,
        start_from=f"{origin.uri}#{source.id}",
        pipeline=PipelineRef(namespace="default", name="copy"),
        s3=None,
        adopt=False,
    )
    assert start is not None and start.state["grades"].adopted
    assert stored_sizes(copy.objects, start)["grades"].rows == 42
    assert copy.latest() is None  # only read


@pytest.mark.parametrize("spelled", ["{uri}", "{uri}/", "{path}", "file:{path}"])
def test_a_pipeline_cannot_start_from_its_own_root(tmp_path: Path, spelled: str) -> None:
    """Its older checkpoint was adopted under sequence 0 again (an old step intent replayed)
    and named its own state by URI, which the vacuum then deleted whole."""
    store = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    first = store.commit(manifest(None))
    (Path(store.uri.removeprefix("file://")) / "latest").unlink()  # to start over from it
    root = spelled.format(uri=store.uri, path=store.uri.removeprefix("file://"))
    with pytest.raises(SpindleError) as refused:
        starting_checkpoint(
            store,
            start_from=f"{root}#{first.id}",
            pipeline=PipelineRef(namespace="default", name="grades"),
            s3=None,
            adopt=True,
        )
    assert refused.value.reason == "StartFromOwnRoot"
    assert "another spec.storage.uri" in refused.value.message
    assert store.latest() is None  # nothing was adopted


def test_pipeline_root_and_unsupported_uris() -> None:
    assert pipeline_root("s3://b/p/", namespace="ns", name="n") == "s3://b/p/ns/n"
    assert pipeline_root("file:///a b", namespace="ns", name="n") == "file:///a b/ns/n"
    for uri in ("ftp://host/x", "file://host/x"):
        with pytest.raises(SpindleError) as bad:
            open_objects(uri)
        assert bad.value.reason == "InvalidStorageUri"
    for relative in ("pstate", "./pstate", "file:pstate"):  # read from each command's directory
        with pytest.raises(SpindleError) as bad:
            pipeline_root(relative, namespace="ns", name="n")
        assert bad.value.reason == "InvalidStorageUri" and "absolute" in bad.value.message


def test_a_local_store_is_where_its_uri_spells_it(tmp_path: Path) -> None:
    """A space, `%` or a non-ASCII letter is the path's own, as Hadoop reads it: `%20` would
    be another directory (found as checkpoints in `my%20home` and state in `my%2520home`)."""
    root = tmp_path / "my home %20 é"
    store = open_objects(f"file://{root}")
    store.write("k", b"v")
    assert (root / "k").read_bytes() == b"v" and store.uri == f"file://{root}"
    assert open_objects(store.uri).read("k").data == b"v"


def test_latest_follows_another_writer_and_reads_nothing_new_while_the_pointer_stays(
    tmp_path: Path,
) -> None:
    """The operator keeps one store per pipeline and asks it at every reconcile: an unchanged
    pointer gives the manifest already read; a commit by the driver is seen at once."""
    operator = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    driver = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    first = driver.commit(manifest(None))
    seen = operator.latest()
    assert seen == first
    assert operator.latest() is seen  # the pointer did not move: no manifest read
    second = driver.commit(manifest(first, offset=1))
    assert operator.latest() == second
    third = operator.commit(manifest(second, offset=2))  # its own commit is its new head
    assert operator.latest() is third and driver.latest() == third


def test_a_place_is_the_same_however_it_is_spelled(tmp_path: Path) -> None:
    from spindle.checkpoint.objects import place

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    real = str(tmp_path / "real")
    for spelled in (real, f"{real}/", f"file:{real}", f"file://{real}/", str(tmp_path / "link")):
        assert place(spelled) == real, spelled
    assert place("s3a://bucket/p/") == place("s3://bucket/p") == "s3://bucket/p"
    assert place("file:///") == "/"


def test_a_report_or_a_delta_log_of_another_shape_is_corrupt_or_unknown_not_a_crash(
    tmp_path: Path,
) -> None:
    """A JSON list where an object is expected was an `AttributeError` traceback."""
    store = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    first = store.commit(manifest(None))
    store.objects.write("previews/abc.json", b"[1, 2]")
    with pytest.raises(SpindleError) as corrupt:
        store.latest_preview()
    assert corrupt.value.reason == "CheckpointUnreadable"
    log = Path(store.uri.removeprefix("file://")) / first.state["grades"].path / "_delta_log"
    log.mkdir(parents=True)
    added = {"add": {"path": "a.parquet", "size": 100, "stats": "[1, 2]"}}
    (log / f"{first.state['grades'].version:020d}.json").write_text(json.dumps(added) + "\n")
    sizes = stored_sizes(store.objects, first)["grades"]
    assert sizes.rows is None  # the estimate says unknown
