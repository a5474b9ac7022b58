"""Pipeline status: what the operator records, through the status subresource only.

Everything the operator knows about a pipeline lives here (never in annotations), so GitOps tools
that own `metadata` and `spec` never see a difference they did not make.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from spindle.api.types import Phase


class _Status(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Condition(_Status):
    type: str = Field(description="Condition type, e.g. Ready.")
    status: str = Field(pattern="^(True|False|Unknown)$", description="True, False or Unknown.")
    reason: str = Field(description="CamelCase reason; the troubleshooting guide lists them.")
    message: str = Field(description="What happened and what to do about it.")
    last_transition_time: str = Field(
        alias="lastTransitionTime", description="When the status last changed (RFC 3339)."
    )
    observed_generation: int | None = Field(
        default=None, alias="observedGeneration", description="The generation it describes."
    )


class ProgramDiff(_Status):
    added_tables: list[str] = Field(description="Tables in the new program only.")
    removed_tables: list[str] = Field(description="Tables in the checkpointed program only.")
    modified_tables: list[str] = Field(description="Tables whose schema or properties changed.")
    added_views: list[str] = Field(description="Views in the new program only.")
    removed_views: list[str] = Field(description="Views in the checkpointed program only.")
    modified_views: list[str] = Field(description="Views whose data changes (transitively).")


class ChangeDiff(_Status):
    """Feldera's deployment_runtime_status_details shape, field for field."""

    program_diff: ProgramDiff = Field(description="Tables and views that changed.")
    program_diff_error: str | None = Field(
        default=None, description="Why no diff could be computed, if so."
    )
    added_input_connectors: list[str] = Field(description="`relation.connector` keys.")
    removed_input_connectors: list[str] = Field(description="`relation.connector` keys.")
    modified_input_connectors: list[str] = Field(description="`relation.connector` keys.")
    added_output_connectors: list[str] = Field(description="`relation.connector` keys.")
    removed_output_connectors: list[str] = Field(description="`relation.connector` keys.")
    modified_output_connectors: list[str] = Field(description="`relation.connector` keys.")

    @model_serializer(mode="wrap")
    def _always_with_error(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Feldera's shape always has `program_diff_error`, even when it is null."""
        body: dict[str, Any] = handler(self)
        body["program_diff_error"] = self.program_diff_error
        return body


class PendingChange(_Status):
    id: str = Field(description="The change id to approve: spindle.dev/approve=<id>.")
    diff: ChangeDiff = Field(description="What changed, in Feldera's shape.")
    changes: dict[str, Any] = Field(
        default_factory=dict, description="Why each object changed, and its category."
    )
    bootstrap: dict[str, Any] = Field(
        default_factory=dict, description="What bootstrapping will do, or why it is refused."
    )
    estimate: dict[str, Any] | None = Field(
        default=None,
        description="What approving costs, from the checkpoint's Delta statistics (no Spark "
        "job): views to evaluate, stored rows and bytes they read, rows read from connectors "
        "(always 0), outputs and what happens to them, tables emptied by a breaking schema "
        "change with their stored rows, inputs read again from their start, and a duration "
        "from the throughput earlier checkpoints recorded ('unknown' with no history).",
    )
    reason: str | None = Field(
        default=None, description="'restate' when views are recomputed on request."
    )
    preview: dict[str, Any] | None = Field(
        default=None,
        description="The counts of a data-diff preview of this change (spindle.dev/preview): "
        "per new or modified view, rows before and after, rows added, removed and changed, and "
        "the changed columns. The full report, with sample rows, is previews/<id>.json beside "
        "the checkpoints.",
    )
    omitted: dict[str, int] | None = Field(
        default=None,
        description="How many entries of each long list above the status leaves out, by "
        "list (e.g. 'changes', 'diff.program_diff.modified_views', 'estimate.viewsToEvaluate'"
        "): it keeps 100 of each, those that changed themselves and previewed views whose rows "
        "differ first, so that a large program's status stays within "
        "what the API server stores. `spindle plan -f pipeline.yaml` shows the whole change.",
    )


class CheckpointStatus(_Status):
    id: str = Field(description="Checkpoint id.")
    sequence: int = Field(description="0 for the first checkpoint, +1 for each after.")
    time: str = Field(description="When it was committed (RFC 3339).")
    uri: str = Field(description="Its manifest in object storage.")
    table_rows: int = Field(default=0, alias="tableRows", description="Rows stored in tables.")
    view_rows: int = Field(default=0, alias="viewRows", description="Rows stored in views.")


class BootstrapStatus(_Status):
    change_id: str = Field(alias="changeId", description="The change that was bootstrapped.")
    checkpoint: str = Field(description="The checkpoint the bootstrap committed.")
    approved_by: str | None = Field(
        default=None, alias="approvedBy", description="Who or what approved it."
    )
    finished_at: str = Field(alias="finishedAt", description="When it committed (RFC 3339).")
    views_evaluated: int = Field(
        default=0, alias="viewsEvaluated", description="Views evaluated from stored state."
    )
    input_records_read: int = Field(
        default=0,
        alias="inputRecordsRead",
        description="Records read from input connectors while bootstrapping (0: none re-ingested).",
    )


class DriverStatus(_Status):
    name: str = Field(description="The Spark driver pod.")
    mode: str = Field(pattern="^(run|bootstrap)$", description="What it was started to do.")
    phase: str = Field(description="The pod's phase.")


class ViewMaintenance(_Status):
    mode: str = Field(description="incremental (from its inputs' changes) or recompute.")
    reason: str | None = Field(default=None, description="Why the view recomputes.")


class PipelineStatus(_Status):
    phase: Phase = Field(description="Where the pipeline is in its lifecycle.")
    observed_generation: int = Field(
        alias="observedGeneration", description="The spec generation this status describes."
    )
    program_hash: str | None = Field(
        default=None, alias="programHash", description="Fingerprint of spec.sql."
    )
    checkpointed_program_hash: str | None = Field(
        default=None,
        alias="checkpointedProgramHash",
        description="Fingerprint of the program in the latest checkpoint.",
    )
    pending_change: PendingChange | None = Field(
        default=None, alias="pendingChange", description="The change awaiting approval."
    )
    last_checkpoint: CheckpointStatus | None = Field(
        default=None, alias="lastCheckpoint", description="The latest committed checkpoint."
    )
    last_bootstrap: BootstrapStatus | None = Field(
        default=None, alias="lastBootstrap", description="The last completed bootstrap."
    )
    driver_pod: DriverStatus | None = Field(
        default=None, alias="driverPod", description="The current Spark driver pod."
    )
    maintenance: dict[str, ViewMaintenance] | None = Field(
        default=None,
        description="How each view of spec.sql is kept up to date: incremental, or recompute "
        "with the construct that needs it (the views that recompute first, 100 at most).",
    )
    maintenance_omitted: int | None = Field(
        default=None,
        alias="maintenanceOmitted",
        description="How many views `maintenance` leaves out; `spindle plan -f pipeline.yaml` "
        "shows them all.",
    )
    ignored_approval: str | None = Field(
        default=None,
        alias="ignoredApproval",
        description="The last approval id that named no pending change (an Event said why).",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Kubernetes-style conditions: Ready; Previewed while a preview is asked "
        "for; Recorded (False, StatusTooLarge) when the API server refused the full status.",
    )

    def to_json(self) -> dict[str, Any]:
        """The status as written to `.status` (camelCase, no nulls but Feldera's)."""
        body: dict[str, Any] = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        return body
