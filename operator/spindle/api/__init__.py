"""The Pipeline API types (spec and status): pydantic models, the single source of truth.

The CRD in crds/ is generated from these models; `spindle local apply` validates manifests with
them too, so a manifest means the same thing on a laptop and in a cluster.
"""

from spindle.api.types import (
    API_VERSION,
    GROUP,
    KIND,
    BootstrapPolicy,
    DesiredState,
    OutputsSpec,
    Phase,
    PipelineManifest,
    PipelineSpec,
    RetentionSpec,
    SecretKeyRef,
    SparkSpec,
    StorageSpec,
    load_manifest_document,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "BootstrapPolicy",
    "DesiredState",
    "OutputsSpec",
    "Phase",
    "PipelineManifest",
    "PipelineSpec",
    "RetentionSpec",
    "SecretKeyRef",
    "SparkSpec",
    "StorageSpec",
    "load_manifest_document",
]
