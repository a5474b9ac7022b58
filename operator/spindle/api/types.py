"""Pipeline spec and status models. Every field has a description (it becomes the CRD's)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from enum import StrEnum
from fractions import Fraction
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from spindle.errors import SpindleError
from spindle.versions import RUNTIME_SETTINGS

GROUP = "spindle.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Pipeline"
APPROVE_ANNOTATION = f"{GROUP}/approve"
"""`spindle.dev/approve=<change id>` approves exactly that pending change."""
PREVIEW_ANNOTATION = f"{GROUP}/preview"
"""`spindle.dev/preview=<change id>` asks for a data-diff preview of that pending change."""
RESTATE_ANNOTATION = f"{GROUP}/restate"
"""`spindle.dev/restate=<view>[,<view>...][@<label>]` asks to recompute views (and their
dependents) without an SQL change, through the same approval. A request is served once; to
restate the same views again, change the label."""
QUERY_PORT = 4047
"""The driver pod's read-only query server, on the pod's loopback only: `kubectl spindle
query` reaches it through the API server's port-forward (`runtime.query_server`)."""
HEALTH_PORT = 4048
"""The driver pod's readiness server, on the pod IP (`runtime.health`)."""
READY_PATH = "/readyz"
"""What its readiness probe asks (`GET`): not Ready while the driver waits to retry a step."""


def request_annotation(annotations: dict[str, Any] | None, key: str) -> str | None:
    """A request annotation of a Pipeline (`spindle.dev/approve`, `spindle.dev/preview`) as
    its value means it: without the whitespace around it (YAML's `|` adds a newline), None
    when empty. The operator and `spindle plan -f` read it with this one function: read as
    written, an approval was ignored, and a preview pod had a name the API server refuses."""
    value = (annotations or {}).get(key)
    return (value.strip() or None) if isinstance(value, str) else None


def restate_views(request: str | None) -> tuple[str, ...]:
    """The view names of a restatement request (`a,b@label`): stripped, empty ones dropped."""
    if not request:
        return ()
    names = request.partition("@")[0]
    return tuple(n.strip() for n in names.split(",") if n.strip())


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class BootstrapPolicy(StrEnum):
    AWAIT_APPROVAL = "await_approval"
    ALLOW = "allow"
    REJECT = "reject"


class DesiredState(StrEnum):
    RUNNING = "Running"
    PAUSED = "Paused"
    STOPPED = "Stopped"


class Phase(StrEnum):
    PENDING = "Pending"
    AWAITING_APPROVAL = "AwaitingApproval"
    BOOTSTRAPPING = "Bootstrapping"
    RUNNING = "Running"
    PAUSED = "Paused"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    FAILED = "Failed"


class SecretKeyRef(_Model):
    # An empty name made the operator's GET of the Secret a LIST of all Secrets, which it may
    # not do (403): the pipeline never got a condition. The names Kubernetes allows, only.
    name: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=253,
        description="Name of a Secret in the pipeline's namespace.",
    )
    key: str = Field(
        pattern=r"^[-._a-zA-Z0-9]+$", max_length=253, description="Key within the Secret."
    )


class StorageCredentials(_Model):
    access_key_id: SecretKeyRef = Field(
        alias="accessKeyId", description="Secret key holding the S3 access key id."
    )
    secret_access_key: SecretKeyRef = Field(
        alias="secretAccessKey", description="Secret key holding the S3 secret access key."
    )


DURATION = r"^(0|[0-9]+(s|m|h|d))$"
DURATION_MAX_LENGTH = 16
"""The longest duration the CRD takes (a pattern with no bound let megabytes through)."""
MAX_DURATION_SECONDS = 100 * 365 * 86400
"""The longest duration Spindle takes (100 years): far beyond any retention, and well within
what a `datetime.timedelta` holds (a larger one stopped the driver's vacuum)."""
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """`90s`, `10m`, `1h`, `7d` (or `0`) in seconds."""
    return 0 if text == "0" else int(text[:-1]) * _SECONDS[text[-1]]


class RetentionSpec(_Model):
    checkpoints: int = Field(
        default=10,
        ge=1,
        description="Keep at least the newest N checkpoints (the latest is always kept), like "
        "Flink's state.checkpoints.num-retained. Older ones, and the Delta files and versions "
        "only they reference, are vacuumed after each commit.",
    )
    min_age: str = Field(
        default="10m",
        alias="minAge",
        pattern=DURATION,
        max_length=DURATION_MAX_LENGTH,
        description="Never delete a checkpoint younger than this ('0', '90s', '10m', '1h', "
        "'7d'), like Delta's deletedFileRetentionDuration: readers and restarts from a recent "
        "checkpoint stay safe. A checkpoint goes only when it is beyond `checkpoints` and "
        "older than `minAge`.",
    )

    @field_validator("min_age", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if not isinstance(value, str) or not re.match(DURATION, value):
            raise ValueError(
                f"{value!r} is not a duration; write a whole number with a unit, such as "
                "'90s', '10m', '1h' or '7d' (or '0')"
            )
        if duration_seconds(value) > MAX_DURATION_SECONDS:
            raise ValueError(f"{value!r} is longer than 100 years; write a shorter duration")
        return value

    @property
    def min_age_seconds(self) -> int:
        return duration_seconds(self.min_age)


class StorageSpec(_Model):
    uri: str = Field(
        description="Checkpoint and state location, e.g. s3://bucket/prefix; file:///path "
        "(absolute) only with `spindle local`: the operator refuses it (StorageNotShared). "
        "The pipeline's data lives under <uri>/<namespace>/<name>/."
    )
    endpoint: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/?#]+(/\S*)?$",
        max_length=2048,
        description="S3 endpoint URL (non-AWS S3), http:// or https://.",
    )
    region: str | None = Field(default=None, description="S3 region.")
    credentials: StorageCredentials | None = Field(
        default=None, description="S3 credentials, only as references to a Secret."
    )
    start_from: str | None = Field(
        default=None,
        alias="startFrom",
        description="When the pipeline has no checkpoint yet, start from this one: "
        "'<pipeline root URI>#<checkpoint id>' (another pipeline's, or a backup's; never this "
        "pipeline's own root). Its state "
        "is read, never written; the program is diffed against it as usual.",
    )
    delete_on_pipeline_deletion: bool = Field(
        default=False,
        alias="deleteOnPipelineDeletion",
        description="Delete checkpoints and state when the Pipeline is deleted.",
    )
    retention: RetentionSpec = Field(
        default_factory=RetentionSpec,
        description="How many checkpoints, and for how long, to keep; state only older "
        "checkpoints reference is vacuumed.",
    )


QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
"""A non-negative Kubernetes quantity in its usual forms ('500m', '1.5', '2Gi'): a negative or
malformed one is refused by the API server instead of failing the driver pod later."""


QUANTITY_MAX_LENGTH = 32
"""The longest quantity the CRD takes: the largest a Kubernetes quantity holds (2^63 - 1) is 19
digits; a pattern with no bound let a 310-digit one through."""
MAX_QUANTITY = 2**63 - 1
"""The largest quantity Kubernetes stores (an int64); a larger one is refused up front (its
value in floating point was infinite, and every reconcile failed on it)."""

QUANTITY_FACTORS = {
    "": Fraction(1),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
"""What each suffix of a `QUANTITY` multiplies its number by."""


def quantity_value(quantity: str) -> float:
    """A `QUANTITY`'s value: '1.5Gi' is 1610612736.0, '500m' is 0.5."""
    return float(exact_quantity(quantity))


def exact_quantity(quantity: str) -> Fraction:
    """A `QUANTITY`'s value with no rounding: in floating point 2^63 - 1 was 2^63, over
    `MAX_QUANTITY`."""
    number = re.match(r"[0-9.]+", quantity)
    assert number is not None, quantity
    return Fraction(number.group()) * QUANTITY_FACTORS[quantity[number.end() :]]


def mebibytes(quantity: str) -> int:
    """A memory `QUANTITY` in whole MiB, rounded up (Spark takes no fractions: '1.5Gi' is 1536)."""
    return math.ceil(quantity_value(quantity) / 2**20)


class Resources(_Model):
    cpu: str | None = Field(
        default=None,
        pattern=QUANTITY,
        max_length=QUANTITY_MAX_LENGTH,
        description="CPU request and limit, e.g. '1' or '500m'.",
    )
    memory: str | None = Field(
        default=None,
        pattern=QUANTITY,
        max_length=QUANTITY_MAX_LENGTH,
        description="Memory request and limit, e.g. '2Gi'.",
    )

    @field_validator("cpu", "memory")
    @classmethod
    def _within_kubernetes(cls, quantity: str | None) -> str | None:
        if quantity is not None and exact_quantity(quantity) > MAX_QUANTITY:
            raise ValueError(
                f"{quantity!r} is larger than a Kubernetes quantity can be (2^63 - 1); "
                "write a smaller one, e.g. '4' or '8Gi'"
            )
        return quantity

    @field_validator("memory")
    @classmethod
    def _at_least_a_mebibyte(cls, memory: str | None) -> str | None:
        if memory is not None and quantity_value(memory) < 2**20:
            raise ValueError(
                f"{memory!r} is less than 1Mi: a memory quantity counts bytes ('512m' is half "
                "a byte); write it with a binary suffix, e.g. '512Mi' or '2Gi'"
            )
        return memory


def _short_hash(text: str) -> str:
    """The 12 hex digits a settings fingerprint is (a pod label value)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def sql_fingerprint(sql: str) -> str:
    """A short hash of a program as written (`PipelineSpec.sql_fingerprint`): a driver's, or
    a checkpoint's, to compare with one."""
    return _short_hash(sql)


OPERATOR_SETTINGS: tuple[tuple[str, str], ...] = (
    (
        r"spark\.master|spark\.submit\.deploymode|spark\.kubernetes\.driver\.master",
        "spec.spark.mode",
    ),
    (r"spark\.kubernetes\.((driver|executor)\.)?container\.image", "spec.spark.image"),
    (r"spark\.kubernetes\.authenticate\..*", "spec.serviceAccountName"),
    (r"spark\.kubernetes\.namespace", "the pipeline's namespace"),
    (
        r"spark\.kubernetes\.executor\.(podtemplate.*|pod\.(excluded)?featuresteps"
        r"|volumes\.(hostpath|nfs)\..*)",
        "the operator's executor pod template (restricted Pod Security)",
    ),
    (
        r"spark\.kubernetes\.driver\.(podtemplate.*|pod\.(excluded)?featuresteps"
        r"|volumes\.(hostpath|nfs)\..*)",
        "the driver pod the operator makes (restricted Pod Security)",
    ),
    (
        r"spark\.kubernetes\.(driver|executor)\.(secrets|secretkeyref)\..*",
        "spec.storage.credentials",
    ),
)
"""Spark settings the operator sets from the spec, or keeps to itself: each (a pattern of keys,
read without case; what sets it). In `spec.spark.conf` they would pass the cluster's checks on
drivers (the chart's driver.allowedImagePrefixes and driver.allowedServiceAccounts look at
spec.spark.image and spec.serviceAccountName) or the restricted executor pods."""


class SparkSpec(_Model):
    image: str | None = Field(default=None, description="Image for the driver and executors.")
    mode: str = Field(
        default="local",
        pattern="^(local|kubernetes)$",
        description="'local': Spark runs inside the driver pod; 'kubernetes': executors pods.",
    )
    driver: Resources = Field(default_factory=Resources, description="Driver resources.")
    executor: Resources = Field(default_factory=Resources, description="Executor resources.")
    executor_instances: int = Field(
        default=2, ge=1, alias="executorInstances", description="Executors in kubernetes mode."
    )
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark configuration.")

    @field_validator("conf")
    @classmethod
    def _not_the_runtimes(cls, conf: dict[str, str]) -> dict[str, str]:
        owned = sorted(set(conf) & {k for s in RUNTIME_SETTINGS.values() for k in s})
        if owned:
            raise ValueError(
                f"{', '.join(owned)} belongs to the runtime's semantics; pin "
                f"spec.runtimeVersion ({', '.join(RUNTIME_SETTINGS)}) instead"
            )
        for key in sorted(conf):
            for pattern, instead in OPERATOR_SETTINGS:
                if re.fullmatch(pattern, key, flags=re.IGNORECASE):
                    raise ValueError(f"{key} is the operator's to set, from {instead}")
        return conf

    def fingerprint(self) -> str:
        """A short hash of these settings: a driver started with others is restarted."""
        return _short_hash(json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True))


class OutputsSpec(_Model):
    on_bootstrap: str = Field(
        default="replace",
        alias="onBootstrap",
        pattern="^(replace|append|silent)$",
        description="What bootstrapping does to the outputs of new and modified views: "
        "'replace' their contents (a Delta table in one commit; a file output's directory: "
        "a snapshot written, then the change files before it deleted), 'append' the full "
        "contents as Feldera does, or 'silent': write nothing to them (Feldera's "
        "silent_bootstrap; later steps emit changes as usual).",
    )


class PreviewSpec(_Model):
    sample_rows: int = Field(
        default=10,
        ge=0,
        le=100,
        alias="sampleRows",
        description="Sample rows a data-diff preview keeps of each kind (added, removed, "
        "changed) per view.",
    )
    timeout_seconds: int = Field(
        default=600,
        ge=1,
        alias="timeoutSeconds",
        description="How long a data-diff preview may run; past it the preview is cancelled "
        "(PreviewTimedOut) and the pending change stays as it was.",
    )


class RetrySpec(_Model):
    model_config = ConfigDict(
        json_schema_extra={  # the API server refuses what `_initial_within_max` refuses
            "x-kubernetes-validations": [
                {
                    "rule": "self.initialDelaySeconds <= self.maxDelaySeconds",
                    "message": "initialDelaySeconds is longer than maxDelaySeconds: raise "
                    "maxDelaySeconds too",
                }
            ]
        }
    )

    attempts: int = Field(
        default=5,
        ge=0,
        le=100,
        description="How many times a driver retries a step that storage refused "
        "(InputUnreadable, OutputUnwritable, StorageRefused, StorageUnavailable, "
        "StorageRequestRejected, StorageBucketNotFound) before the pipeline fails; each "
        "retry starts again from the last checkpoint. 0: fail at once.",
    )
    initial_delay_seconds: int = Field(
        default=2,
        ge=0,
        le=3600,
        alias="initialDelaySeconds",
        description="The wait before the first retry; each later wait doubles.",
    )
    max_delay_seconds: int = Field(
        default=60,
        ge=0,
        le=3600,
        alias="maxDelaySeconds",
        description="The longest wait between two retries.",
    )

    @model_validator(mode="after")
    def _initial_within_max(self) -> RetrySpec:
        if self.initial_delay_seconds > self.max_delay_seconds:
            raise ValueError(
                f"initialDelaySeconds ({self.initial_delay_seconds}) is longer than "
                f"maxDelaySeconds ({self.max_delay_seconds}): raise maxDelaySeconds too"
            )
        return self

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1 is the first); pure."""
        return float(min(self.max_delay_seconds, self.initial_delay_seconds * 2 ** (retry - 1)))


class PipelineSpec(_Model):
    sql: str = Field(description="The program: CREATE TABLE / VIEW / FUNCTION statements.")
    bootstrap_policy: BootstrapPolicy = Field(
        default=BootstrapPolicy.AWAIT_APPROVAL,
        alias="bootstrapPolicy",
        description="What a program change does: wait for approval, bootstrap, or reject.",
    )
    desired_state: DesiredState = Field(
        default=DesiredState.RUNNING,
        alias="desiredState",
        description="Running, Paused or Stopped.",
    )
    storage: StorageSpec | None = Field(
        default=None, description="Where checkpoints and state live (default: operator default)."
    )
    spark: SparkSpec = Field(default_factory=SparkSpec, description="Spark settings.")
    outputs: OutputsSpec = Field(default_factory=OutputsSpec, description="Output behaviour.")
    retry: RetrySpec = Field(
        default_factory=RetrySpec,
        description="How a driver retries a step that storage refused, before it fails.",
    )
    preview: PreviewSpec = Field(
        default_factory=PreviewSpec,
        description="Bounds of a data-diff preview (spindle.dev/preview, spindle local preview).",
    )
    runtime_version: str | None = Field(
        default=None,
        alias="runtimeVersion",
        description="Pins the runtime: v1 (the default: NULL where a division by zero, an "
        "overflow or a failed cast has no value) or v2 (ANSI SQL: those stop the step with "
        "SqlRuntimeError). A different runtime than the checkpoint's modifies every view.",
    )
    service_account_name: str | None = Field(
        default=None, alias="serviceAccountName", description="Service account of driver pods."
    )
    restart_nonce: int | None = Field(
        default=None,
        alias="restartNonce",
        description="Change it to start a failed driver again, from the last checkpoint, once "
        "what made it fail is fixed outside the spec (a bucket, a permission): a Failed phase "
        "lasts until the spec changes. Nothing else reads it.",
    )

    @property
    def paused(self) -> bool:
        """Whether ingestion is paused (`desiredState: Paused`)."""
        return self.desired_state is DesiredState.PAUSED

    def location_fingerprint(self) -> str:
        """A short hash of where the state is: the storage's uri and endpoint."""
        storage = self.storage
        where = None if storage is None else [storage.uri, storage.endpoint]
        return _short_hash(json.dumps(where))

    def placement_fingerprint(self) -> str:
        """Where a driver keeps its state, then (after a `-`) a short hash of how it reaches
        it and as whom it runs: `storage` (but `startFrom` and `deleteOnPipelineDeletion`,
        which a running driver does not read) and `serviceAccountName`. A driver started with
        others is restarted; a bootstrap only for another location (`location_of`)."""
        storage = (
            self.storage.model_dump(
                mode="json",
                by_alias=True,
                exclude={"start_from", "delete_on_pipeline_deletion"},
                exclude_defaults=True,  # a field added later leaves running drivers alone
            )
            if self.storage is not None
            else None
        )
        placed = {"storage": storage, "serviceAccountName": self.service_account_name}
        return f"{self.location_fingerprint()}-{_short_hash(json.dumps(placed, sort_keys=True))}"

    def sql_fingerprint(self) -> str:
        """A short hash of `sql` as written: the program a driver was started with."""
        return sql_fingerprint(self.sql)

    def driver_fingerprint(self) -> str:
        """A short hash of what a driver is started with (`spark`, and `retry` once it is not
        the default, so drivers started before `retry` existed keep theirs): a driver started
        with other settings is restarted."""
        spark = self.spark.fingerprint()
        if self.retry == RetrySpec():
            return spark
        return _short_hash(spark + self.retry.model_dump_json(by_alias=True))


def location_of(placement: str) -> str:
    """The location part of a `PipelineSpec.placement_fingerprint`."""
    return placement.partition("-")[0]


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    namespace: str = "default"
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)


class PipelineManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    api_version: str = Field(alias="apiVersion", pattern=f"^{GROUP}/{VERSION}$")
    kind: str = Field(pattern=f"^{KIND}$")
    metadata: Metadata
    spec: PipelineSpec
    status: dict[str, Any] | None = None


def load_manifest_document(document: Any, *, source: str) -> PipelineManifest:
    """Validate a Pipeline manifest (YAML/JSON already decoded); errors name the field."""
    if not isinstance(document, dict):  # a program given for a manifest, an empty file, a list
        kinds = {str: "text", list: "a list", int: "a number", float: "a number"}
        kind = kinds.get(type(document), "a single value")
        sql = (
            " It reads as SQL: a manifest holds the program in spec.sql, and `spindle diff OLD "
            "NEW` compares two program files."
            if _looks_like_sql(document)
            else ""
        )
        raise SpindleError(
            reason="InvalidManifest",
            message=f"{source} holds {kind}, not a Pipeline manifest (a YAML or JSON mapping "
            f"with apiVersion {API_VERSION}, kind {KIND}, metadata and spec).{sql}",
            details={"source": source},
        )
    try:
        return PipelineManifest.model_validate(document)
    except ValidationError as error:
        problems = [_said(document, found) for found in error.errors()]
        where, problem = problems[0]
        details: dict[str, Any] = {"source": source, "field": where}
        if len(problems) > 1:  # every field at once: one round of fixes (`also:` lines)
            details["problems"] = len(problems)
            details["more"] = [f"{field}: {said}" for field, said in problems[1:21]]
        raise SpindleError(
            reason="InvalidManifest",
            message=f"{source}: {where}: {problem}. Fix the Pipeline manifest "
            f"(apiVersion {API_VERSION}, kind {KIND}).",
            details=details,
        ) from None


def _said(document: Any, found: Any) -> tuple[str, str]:
    """One validation problem as (dotted field, what is wrong, with a hint where one helps)."""
    where = ".".join(str(part) for part in found["loc"])
    problem = str(found["msg"]).removeprefix("Value error, ")
    if found["type"] == "missing":  # a key misspelt beside it is why (`sqll` for `sql`)
        problem += _misspelt(document, found["loc"])
    elif found["type"] in ("enum", "literal_error", "string_pattern_mismatch"):
        given = repr(found.get("input"))
        problem += f" (it is {given[:80] + '...' if len(given) > 80 else given})"
    return where, problem


def _looks_like_sql(document: Any) -> bool:
    return isinstance(document, str) and document.lstrip().upper().startswith(("CREATE", "--"))


def _misspelt(document: Any, location: tuple[int | str, ...]) -> str:
    """`(it has 'sqll': did you mean 'sql'?)`, when the mapping that lacks `location`'s last
    key has a key one typo from it."""
    import difflib

    *parents, missing = location
    mapping = document
    for key in parents:
        mapping = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(mapping, dict) or not isinstance(missing, str):
        return ""
    wanted = PipelineSpec.model_fields.get(missing)
    names = [missing, *([wanted.alias] if wanted is not None and wanted.alias else [])]
    for key in mapping:
        if isinstance(key, str) and difflib.get_close_matches(key, names, n=1, cutoff=0.75):
            return f" (it has '{key}': did you mean '{names[-1]}'?)"
    return ""
