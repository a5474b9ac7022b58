"""Which checkpoints a pipeline keeps (`spec.storage.retention`): pure, no storage.

A checkpoint goes only when it is both beyond the newest `checkpoints` and older than `min_age`
(Flink's `state.checkpoints.num-retained` and Delta's `deletedFileRetentionDuration` together).
The kept set is always a prefix of the chain from the latest, so the chain a reader walks is
never broken in the middle, and the latest is always kept.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from spindle.checkpoint.manifest import Manifest


def kept_prefix(
    history: Sequence[Manifest],
    *,
    checkpoints: int,
    min_age: datetime.timedelta,
    now: datetime.datetime,
) -> int:
    """How many of `history` (newest first) to keep."""
    if checkpoints < 1:
        raise ValueError("retention keeps at least one checkpoint")
    kept = 0
    for manifest in history:
        if kept >= checkpoints and now - manifest.created_at >= min_age:
            break
        kept += 1
    return kept


def intent_sequence(key: str) -> int | None:
    """The step sequence of an intent key (`intents/00000012.json`), or of a record beside it
    (`intents/00000012.undone.json`), or None."""
    name = key.rsplit("/", 1)[-1]
    stem = name.removesuffix(".json").removesuffix(".undone")
    return int(stem) if name.endswith(".json") and stem.isdigit() else None
