"""Where a pipeline starts: its own latest checkpoint, or `startFrom` (another checkpoint).

Both bodies and the driver resolve the starting point the same way. Planning only reads the
origin (`adopt=False`); the driver adopts it into the pipeline's own store before it runs.
"""

from __future__ import annotations

from spindle.checkpoint.manifest import Manifest, PipelineRef
from spindle.checkpoint.objects import S3Options, place
from spindle.checkpoint.retry import RetryPolicy
from spindle.checkpoint.store import CheckpointStore, open_store
from spindle.errors import SpindleError


def starting_checkpoint(
    store: CheckpointStore,
    *,
    start_from: str | None,
    pipeline: PipelineRef,
    s3: S3Options | None,
    adopt: bool,
    retry: RetryPolicy | None = None,
) -> Manifest | None:
    """The pipeline's latest checkpoint; without one, the `startFrom` checkpoint
    (`<pipeline root URI>[#<checkpoint id>]`), adopted into `store` when `adopt`. The origin is
    read with `retry`, the caller's bound on its own store (the operator's is 8 s, not 30)."""
    latest = store.latest()
    if latest is not None or not start_from:
        return latest
    uri, _, checkpoint_id = (
        start_from.rpartition("#") if "#" in start_from else (start_from, "", "")
    )
    if place(uri) == place(store.uri):
        raise SpindleError(
            reason="StartFromOwnRoot",
            message=f"spec.storage.startFrom names this pipeline's own storage root ({uri}). A "
            "pipeline cannot start over from its own checkpoints: it would write over the "
            "state and step intents they name. Give the pipeline another spec.storage.uri and "
            "keep startFrom naming this root (its checkpoints are then only read).",
            details={"uri": uri},
        )
    origin = open_store(uri, s3=s3, retry=retry)
    if not checkpoint_id:
        newest = origin.latest()
        if newest is None:
            raise SpindleError(
                reason="CheckpointNotFound",
                message=f"startFrom names {uri}, which has no checkpoint; name a pipeline root "
                "that has one, as <uri>#<checkpoint id>.",
                details={"uri": uri},
            )
        checkpoint_id = newest.id
    if not adopt:  # its state where it lives, as adopting it would name it
        return origin.located(checkpoint_id)
    return store.adopt(origin, checkpoint_id, pipeline=pipeline)
