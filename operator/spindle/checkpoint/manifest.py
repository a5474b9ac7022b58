"""The checkpoint manifest: what a checkpoint is, as a frozen, versioned pydantic model.

Compatibility rule (FLIP-190 style): a manifest format never changes in place. A change adds a
new `format_version`, a migration from the previous version in `MIGRATIONS`, and a golden
manifest under `tests/golden/manifests/`. Every released format stays readable; a manifest of a
*newer* format than this Spindle knows is refused with `CheckpointFormatUnsupported`.

Diffs recompute from `program.text` with the current parser; `program.fingerprints` is only a
cache, so a parser upgrade never produces spurious changes.
"""

from __future__ import annotations

import datetime
import json
import secrets
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spindle.errors import SpindleError, first_problem

FORMAT_VERSION = 5


def new_checkpoint_id(sequence: int) -> str:
    return f"{sequence:08d}-{secrets.token_hex(3)}"


def new_incarnation() -> str:
    """An incarnation id: random, so a pipeline created again over new storage gets another."""
    return secrets.token_hex(6)


def is_uri(path: str) -> bool:
    """A state path that names its own location (adopted state) rather than one relative to the
    pipeline root."""
    return "://" in path


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PipelineRef(_Frozen):
    namespace: str
    name: str


class ProgramRecord(_Frozen):
    text: str = Field(description="The program as applied, verbatim.")
    fingerprint: str = Field(description="Program fingerprint (a cache; text is the truth).")
    fingerprints: dict[str, str] = Field(
        default_factory=dict, description="Per-object fingerprints, `table:t` / `view:v` keys."
    )
    dependencies: dict[str, list[str]] = Field(
        default_factory=dict, description="For each view, the relations it reads."
    )


class StateRecord(_Frozen):
    kind: Literal["table", "view"]
    path: str = Field(description="Delta table location: relative to the pipeline root, or a URI.")
    version: int = Field(ge=-1, description="Delta version the checkpoint saw (-1: empty).")
    rows: int | None = None
    layout: Literal["rows", "zset", "groups"] = Field(
        default="rows",
        description="How the Delta table holds the relation: `rows` (its contents), `zset` "
        "(rows with a `__w` weight, summed per row), or `groups` (an aggregate's rows with its "
        "running values in `__`-prefixed columns).",
    )

    @property
    def adopted(self) -> bool:
        """State of the checkpoint this pipeline started from (`startFrom`): named by absolute
        URI, read but never written."""
        return is_uri(self.path)


class ConnectorRecord(_Frozen):
    direction: Literal["input", "output"]
    offset: Any = Field(default=None, description="Opaque to everything but the connector.")


class BootstrapRecord(_Frozen):
    change_id: str
    approved_by: str | None = None
    started_at: datetime.datetime
    finished_at: datetime.datetime
    views_evaluated: list[str] = Field(default_factory=list)
    input_records_read: int = 0
    state_rows_read: int | None = Field(
        default=None,
        description="Rows the bootstrap scanned from stored state (format 3 on; None before).",
    )


class RateRecord(_Frozen):
    """Rows processed in how many seconds, by one step or bootstrap."""

    rows: int = Field(ge=0)
    seconds: float = Field(ge=0)
    checkpoint: str = Field(description="The checkpoint that step or bootstrap committed.")


class Manifest(_Frozen):
    format_version: Literal[5] = 5
    id: str
    parent: str | None
    sequence: int = Field(ge=0, description="0 for the first checkpoint, parent's + 1 after.")
    created_at: datetime.datetime
    pipeline: PipelineRef
    program: ProgramRecord
    parser_version: str
    plan_format_version: int
    runtime_version: str
    translation_revision: int = Field(
        default=0,
        ge=0,
        description="How views were written for Spark when this checkpoint's state was "
        "computed (`program.spark_calls.TRANSLATION_REVISION`; 0 before format 4): a view "
        "whose translation changed since is reported modified, with the reason `runtime`.",
    )
    spark_version: str | None = None
    connectors: dict[str, ConnectorRecord] = Field(default_factory=dict)
    state: dict[str, StateRecord] = Field(default_factory=dict)
    bootstrap: BootstrapRecord | None = None
    origin: str | None = Field(
        default=None, description="URI#id of a checkpoint this pipeline was started from."
    )
    throughput: dict[Literal["step", "bootstrap"], RateRecord] = Field(
        default_factory=dict,
        description="The latest step's rows ingested and the latest bootstrap's stored rows "
        "read, with their seconds; carried forward from the parent, so the latest checkpoint "
        "holds the pipeline's history (what a bootstrap's duration is estimated from).",
    )
    restated: str | None = Field(
        default=None,
        description="The last restatement request (spindle.dev/restate) a bootstrap served; "
        "carried forward, so a served request is not asked again.",
    )
    incarnation: str | None = Field(
        default=None,
        description="Which incarnation of the pipeline this is: an id its storage holds from "
        "its first checkpoint on (`CheckpointStore.incarnation`), carried by every later one. "
        "It names the pipeline's writes to its Delta outputs, so a pipeline created again "
        "under the same name over new storage is another writer, whose commits Delta does "
        "not skip as ones it already has. None before format 5: such a pipeline keeps "
        "writing as it did.",
    )

    def to_json(self) -> bytes:
        return (self.model_dump_json(indent=2) + "\n").encode()


Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _file_offsets_as_marks(document: dict[str, Any]) -> dict[str, Any]:
    """1 → 2: `file_input` offsets were the sorted list of every file ingested (only that
    connector stored a list); they become `{"mark": null, "seen": [...]}`, which the connector
    reads as "new is whatever is not in `seen`" until its next step sets a modification-time
    mark and drops the list (`runtime.file_offsets`)."""
    connectors = {
        key: {**record, "offset": {"mark": None, "seen": sorted(record["offset"])}}
        if isinstance(record, dict) and isinstance(record.get("offset"), list)
        else record
        for key, record in (document.get("connectors") or {}).items()
    }
    return {**document, "format_version": 2, "connectors": connectors}


def _throughput(document: dict[str, Any]) -> dict[str, Any]:
    """2 → 3: checkpoints record throughput and served restatements; format 2 recorded none
    (no history: a bootstrap's duration is "unknown" until one is measured)."""
    return {**document, "format_version": 3}


def _translation(document: dict[str, Any]) -> dict[str, Any]:
    """3 → 4: checkpoints record the revision of the translation to Spark SQL their state was
    computed with; format 3's were computed with revision 0 (before calls were written for
    Spark as the program wrote them)."""
    return {**document, "format_version": 4, "translation_revision": 0}


def _incarnation(document: dict[str, Any]) -> dict[str, Any]:
    """4 → 5: checkpoints record the pipeline's incarnation; format 4's have none, and keep
    writing to their Delta outputs as the writer they were (a crashed step's replay after an
    upgrade is still skipped where its first attempt committed)."""
    return {**document, "format_version": 5, "incarnation": None}


MIGRATIONS: dict[int, Migration] = {
    # from_version: function turning a from_version document into from_version + 1
    1: _file_offsets_as_marks,
    2: _throughput,
    3: _translation,
    4: _incarnation,
}


def load_manifest(data: bytes, *, uri: str) -> Manifest:
    """Parse a manifest of any released format, migrating it to the current one."""
    try:
        document = json.loads(data)
        version = int(document.get("format_version", 0))
    except (ValueError, AttributeError, TypeError) as error:
        raise unreadable(uri, f"not a JSON manifest ({error})") from None
    if version > FORMAT_VERSION:
        raise SpindleError(
            reason="CheckpointFormatUnsupported",
            message=f"Checkpoint {uri} has manifest format {version}, newer than this Spindle "
            f"reads ({FORMAT_VERSION}). Upgrade Spindle (the operator and the runtime image).",
            details={"uri": uri, "format_version": version, "supported": FORMAT_VERSION},
        )
    while version < FORMAT_VERSION:
        migrate = MIGRATIONS.get(version)
        if migrate is None:
            raise unreadable(uri, f"format {version} has no migration")
        try:
            document = migrate(document)
        except (TypeError, KeyError, AttributeError, ValueError) as error:
            raise unreadable(uri, f"format {version} does not have its shape ({error})") from None
        version += 1
    try:
        return Manifest.model_validate(document)
    except ValidationError as error:
        where, problem = first_problem(error)
        raise unreadable(uri, f"{where}: {problem}") from None


def unreadable(uri: str, problem: str) -> SpindleError:
    return SpindleError(
        reason="CheckpointUnreadable",
        message=f"Checkpoint {uri} cannot be read: {problem}. Restore it from a backup, or "
        "start the pipeline from an older checkpoint (spindle checkpoints list).",
        details={"uri": uri, "problem": problem},
    )
