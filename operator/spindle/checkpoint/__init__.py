"""Checkpoints in object storage: versioned manifests, atomic commits, directory and S3 stores.

This package's top level holds only the records a checkpoint is made of (`manifest`), which the
pure brain (`lifecycle`, `plan`) reads. The I/O lives in its own modules and is imported from
there: `store` (`CheckpointStore`, `open_store`), `objects` (`open_objects`, `S3Options`),
`origin` (`starting_checkpoint`) and `retry`.
"""

from spindle.checkpoint.manifest import (
    FORMAT_VERSION,
    BootstrapRecord,
    ConnectorRecord,
    Manifest,
    PipelineRef,
    ProgramRecord,
    RateRecord,
    StateRecord,
    load_manifest,
)

__all__ = [
    "FORMAT_VERSION",
    "BootstrapRecord",
    "ConnectorRecord",
    "Manifest",
    "PipelineRef",
    "ProgramRecord",
    "RateRecord",
    "StateRecord",
    "load_manifest",
]
