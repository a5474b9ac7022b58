"""Retention and vacuum selection (pure): which checkpoints stay, which Delta files go."""

from __future__ import annotations

import datetime
import json

import pytest

from spindle.checkpoint.retention import intent_sequence, kept_prefix
from spindle.runtime.vacuum_rules import (
    advance,
    commit_versions,
    kept_versions,
    parse_commit,
    table_garbage,
    unnamed,
)
from tests.checkpoints import manifest

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def chain(ages_minutes: list[int]) -> list:  # type: ignore[type-arg]
    """Manifests newest first, created `age` minutes before NOW."""
    return [
        manifest(None).model_copy(update={"created_at": NOW - datetime.timedelta(minutes=a)})
        for a in ages_minutes
    ]


def test_a_checkpoint_goes_only_beyond_the_count_and_older_than_min_age() -> None:
    history = chain([0, 1, 2, 30, 40, 50])
    keep = {"now": NOW}
    assert kept_prefix(history, checkpoints=2, min_age=datetime.timedelta(0), **keep) == 2
    assert kept_prefix(history, checkpoints=2, min_age=datetime.timedelta(minutes=10), **keep) == 3
    assert kept_prefix(history, checkpoints=10, min_age=datetime.timedelta(0), **keep) == 6
    assert kept_prefix(history[:1], checkpoints=1, min_age=datetime.timedelta(0), **keep) == 1
    with pytest.raises(ValueError):
        kept_prefix(history, checkpoints=0, min_age=datetime.timedelta(0), now=NOW)


def test_intent_keys_name_their_step() -> None:
    assert intent_sequence("intents/00000012.json") == 12
    assert intent_sequence("intents/00000012.undone.json") == 12
    assert intent_sequence("intents/notes.txt") is None
    assert intent_sequence("intents/00000012.undone") is None


def commit(*actions: tuple[str, str]) -> str:
    return "\n".join(json.dumps({kind: {"path": path}}) for kind, path in actions) + "\n"


def test_snapshots_advance_through_adds_and_removes_with_decoded_paths() -> None:
    first = parse_commit(commit(("add", "a.parquet"), ("add", "x%3Dy/b.parquet")))
    second = parse_commit(
        commit(("remove", "a.parquet"), ("add", "c.parquet")) + '{"commitInfo": {}}\n'
    )
    assert advance(frozenset(), [first, second]) == {"x=y/b.parquet", "c.parquet"}


def test_garbage_is_what_no_kept_version_needs_and_the_log_before_its_checkpoint() -> None:
    t = "state/views/v@0"
    log = [f"{t}/_delta_log/{v:020d}.{ext}" for v in range(25) for ext in ("json", "crc")]
    log += [f"{t}/_delta_log/{v:020d}.checkpoint.parquet" for v in (10, 20)]
    log.append(f"{t}/_delta_log/_last_checkpoint")
    data = [f"{t}/part-{i}.parquet" for i in range(5)] + [f"{t}/deletion_vector_1.bin"]
    doomed = table_garbage(
        log + data, table=t, oldest=17, live=frozenset({"part-3.parquet", "part-4.parquet"})
    )
    before_checkpoint = [
        f"{t}/_delta_log/{v:020d}.{ext}" for v in range(10) for ext in ("json", "crc")
    ]
    assert sorted(doomed) == sorted(before_checkpoint + [f"{t}/part-{i}.parquet" for i in range(3)])
    assert commit_versions(log, table=t)[24] == f"{t}/_delta_log/{24:020d}.json"
    # no checkpoint at or below the oldest kept version: the whole log stays
    assert table_garbage(log, table=t, oldest=5, live=frozenset()) == []


def test_state_directories_no_kept_checkpoint_names_go_whole_and_adopted_state_is_ignored() -> None:
    kept = kept_versions(
        [
            {"t": ("state/tables/t@0", 7), "v": ("state/views/v@3", 2)},
            {"t": ("state/tables/t@0", 5), "o": ("s3://other/state/tables/o@0", 1)},
        ]
    )
    assert kept == {"state/tables/t@0": [7, 5], "state/views/v@3": [2]}
    keys = ["state/tables/t@0/a", "state/views/v@3/b", "state/views/v@1/c", "state/views/v@10/d"]
    assert unnamed(keys, kept) == ["state/views/v@1/c", "state/views/v@10/d"]
