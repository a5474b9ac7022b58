"""What a vacuum deletes, given the kept checkpoints' Delta tables and versions: pure.

Why not Delta's VACUUM: it is time-based, so it would delete files that a kept checkpoint's
older version still needs (time travel to exactly that version is how every step and bootstrap
reads state). Here a file is live when it is in the snapshot of some kept `(path, version)`.
For a table whose kept versions are `v_min..v_max`, the live data files are computed as the
snapshot at `v_min` plus every file added by a commit after `v_min` (a superset of the union of
the kept snapshots: never too few). The Delta log keeps, per table, the newest checkpoint at or
below `v_min` and every commit from it on (what Delta needs to read any kept version, the way its
own log cleanup works); older commits, checksums and checkpoints go. State directories that no
kept checkpoint names are removed whole. Deletion-vector files are always kept (their names are
encoded in the log; Spindle's state tables do not use them today).

Keys are relative to the pipeline root (`state/views/v@0/part-0.parquet`); table paths are the
relative `StateRecord.path`s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

LOG = "_delta_log/"
_COMMIT = re.compile(r"^(\d{20})\.(json|crc)$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]*)?\.parquet$")
_COMPACTED = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


@dataclass(frozen=True)
class Actions:
    """The file actions of one Delta commit (paths relative to the table, decoded)."""

    added: frozenset[str]
    removed: frozenset[str]


def parse_commit(text: str) -> Actions:
    added: set[str] = set()
    removed: set[str] = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        for kind, into in (("add", added), ("cdc", added), ("remove", removed)):
            if kind in action:
                into.add(unquote(action[kind]["path"]))
    return Actions(frozenset(added), frozenset(removed))


def advance(files: frozenset[str], commits: Iterable[Actions]) -> frozenset[str]:
    """A snapshot's files after `commits`, in version order."""
    current = set(files)
    for actions in commits:
        current -= actions.removed
        current |= actions.added
    return frozenset(current)


def log_version(name: str) -> int | None:
    """The version a `_delta_log` file belongs to (a compacted range: its end), or None for
    files to keep whatever their age (`_last_checkpoint`, sidecars, unknown names)."""
    for pattern, group in ((_COMMIT, 1), (_CHECKPOINT, 1), (_COMPACTED, 2)):
        match = pattern.match(name)
        if match:
            return int(match.group(group))
    return None


def commit_versions(keys: Iterable[str], *, table: str) -> dict[int, str]:
    """The JSON commit files of a table, by version."""
    found = {}
    for key in keys:
        match = _COMMIT.match(key.removeprefix(f"{table}/{LOG}"))
        if key.startswith(f"{table}/{LOG}") and match and match.group(2) == "json":
            found[int(match.group(1))] = key
    return found


def log_cutoff(keys: Iterable[str], *, table: str, oldest: int) -> int | None:
    """The newest checkpoint version at or below `oldest`: log files before it are not
    needed to read any kept version (None: no such checkpoint, keep the whole log)."""
    prefix = f"{table}/{LOG}"
    versions = [
        int(m.group(1))
        for key in keys
        if key.startswith(prefix) and (m := _CHECKPOINT.match(key[len(prefix) :]))
    ]
    eligible = [v for v in versions if v <= oldest]
    return max(eligible) if eligible else None


def table_garbage(
    keys: Iterable[str], *, table: str, oldest: int, live: frozenset[str]
) -> list[str]:
    """The keys under one kept table to delete: data files not in `live` (relative to the
    table), and log files older than the log cutoff."""
    keys = list(keys)
    cutoff = log_cutoff(keys, table=table, oldest=oldest)
    doomed = []
    for key in keys:
        relative = key[len(table) + 1 :]
        if relative.startswith(LOG):
            version = log_version(relative[len(LOG) :])
            if cutoff is not None and version is not None and version < cutoff:
                doomed.append(key)
        elif relative not in live and not relative.rsplit("/", 1)[-1].startswith(
            "deletion_vector_"
        ):
            doomed.append(key)
    return doomed


def kept_versions(states: Iterable[Mapping[str, tuple[str, int]]]) -> dict[str, list[int]]:
    """Per relative table path under `state/`, the versions kept checkpoints name."""
    versions: dict[str, list[int]] = {}
    for state in states:
        for path, version in state.values():
            if path.startswith("state/") and "://" not in path:
                versions.setdefault(path, []).append(version)
    return versions


def unnamed(keys: Iterable[str], tables: Iterable[str]) -> list[str]:
    """Keys under `state/` in no kept table: directories no kept checkpoint names."""
    prefixes = tuple(f"{t}/" for t in tables)
    return [k for k in keys if k.startswith("state/") and not k.startswith(prefixes)]
