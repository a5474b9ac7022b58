"""Checkpoints in object storage: versioned manifests, atomic commits, directory and S3 stores."""

from spindle.checkpoint.manifest import (
    FORMAT_VERSION,
    BootstrapRecord,
    ConnectorRecord,
    Manifest,
    PipelineRef,
    ProgramRecord,
    StateRecord,
    load_manifest,
)
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.retry import RetryPolicy
from spindle.checkpoint.store import CheckpointStore, new_checkpoint_id, open_store

__all__ = [
    "FORMAT_VERSION",
    "BootstrapRecord",
    "CheckpointStore",
    "ConnectorRecord",
    "Manifest",
    "PipelineRef",
    "ProgramRecord",
    "RetryPolicy",
    "S3Options",
    "StateRecord",
    "load_manifest",
    "new_checkpoint_id",
    "open_store",
]
