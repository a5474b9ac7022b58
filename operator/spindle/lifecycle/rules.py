"""`decide`: observe → validate → plan → the phase and one next action, as a table of rules.

The first rule whose `when` holds wins. In order:
1. An invalid program: `Failed` (`InvalidProgram`, with line and column); a running driver is
   stopped. (Checked before the table: without a program there is no plan to decide on.)
2. `desiredState: Stopped`: stop the driver (`Stopping`), then `Stopped`.
3. A driver is running: a bootstrap is `Bootstrapping` until the checkpoint records it; a run of
   an older program is stopped gracefully (it checkpoints, then the new program is planned
   against that checkpoint); a driver started paused (or not) when desiredState now says
   otherwise is restarted, and so is one started with other `spec.spark` settings (resources,
   image, mode, conf) or `spec.retry`; otherwise `Running` (or `Paused`), not Ready
   (`StepRetrying`) while the driver waits to retry a step that storage refused. A driver
   deleted by someone else (`kubectl delete pod`) is `Stopping` (`DriverDeleted`) until gone.
4. The driver of this generation failed: `Failed` with its reason, until the spec changes
   (`spec.restartNonce` changes it without changing anything else) or, locally, until the
   user runs the pipeline again (`restart_requested`). A bootstrap that refused a change that
   moved (`ChangeMoved`) did nothing: the new change is decided on as below.
5. No checkpoint yet, or nothing changed: start a run (no approval needed).
6. A change the plan refuses: `Failed` (`LatenessNotBootstrappable`, `TableNotMaterialized`).
7. `bootstrapPolicy: reject`: `Stopped` (`BootstrapRejected`), checkpoint untouched.
8. `allow`, or an approval naming the pending change id: start the bootstrap.
9. Otherwise `AwaitingApproval` (an approval naming another id is ignored: `status` says so).
A start the body was not asked for (`spindle local status`) is shown as `Stopped`
(`NotRunning`), naming the command that starts it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from spindle.api import BootstrapPolicy, DesiredState, Phase
from spindle.api.status import ChangeDiff, PendingChange
from spindle.api.types import (
    APPROVE_ANNOTATION,
    RESTATE_ANNOTATION,
    location_of,
    restate_views,
    sql_fingerprint,
)
from spindle.checkpoint import Manifest
from spindle.errors import SpindleError
from spindle.lifecycle.decision import EVICTED, RETRYING, Action, Decision, failed
from spindle.lifecycle.memo import memoized
from spindle.lifecycle.observation import (
    DriverMode,
    Observation,
    ObservedDriver,
    bootstrapped,
    request_change,
)
from spindle.plan import RESTATE, ChangePlan, Rate, Stored, StoredSize, make_plan
from spindle.program import Program, parse_program
from spindle.program.limits import MAX_PROGRAM_BYTES
from spindle.versions import SUPPORTED_RUNTIME_VERSIONS


@dataclass(frozen=True)
class Situation:
    """An observation with its program and plan: what every rule reads."""

    observed: Observation
    program: Program
    plan: ChangePlan

    @property
    def driver(self) -> ObservedDriver | None:
        return self.observed.driver

    @property
    def active(self) -> bool:
        return self.driver is not None and self.driver.active

    @property
    def running(self) -> ObservedDriver:
        assert self.driver is not None
        return self.driver

    @property
    def policy(self) -> BootstrapPolicy:
        return self.observed.spec.bootstrap_policy

    @property
    def change(self) -> str:
        return self.plan.change_id


Text = Callable[[Situation], str]


@dataclass(frozen=True)
class Rule:
    when: Callable[[Situation], bool]
    phase: Phase | Callable[[Situation], Phase]
    action: Action
    reason: str | Text
    message: str | Text
    ready: bool = False
    shows_change: bool = False
    """The decision carries the pending change (its diff, its id to approve)."""


def _text(value: str | Text, situation: Situation) -> str:
    return value if isinstance(value, str) else value(situation)


def _stopped(s: Situation) -> bool:
    return s.observed.spec.desired_state is DesiredState.STOPPED


def _bootstrapping(s: Situation) -> bool:
    """A bootstrap driver that has not committed its bootstrap where the spec says the state
    is (at a new storage location it never will: it is restarted there instead; other new
    settings wait until it has). Once it has, the driver runs the pipeline, and its later
    steps' checkpoints record no bootstrap: it is done once the checkpoint is no longer the
    one its change was planned from (`ObservedDriver.base`). For a driver that does not say
    which (started before it was recorded): once the checkpoint's plan no longer gives its
    change and the checkpoint holds the program it was started with (a spec edited while it
    bootstraps gives another change from a checkpoint that holds the old program)."""
    if not s.active or s.running.mode is not DriverMode.BOOTSTRAP:
        return False
    placement = s.running.placement
    if placement is not None and location_of(placement) != s.observed.spec.location_fingerprint():
        return False
    if _not_started_as_wanted(s):
        return False
    checkpoint = s.observed.checkpoint
    if checkpoint is None:
        return True
    if bootstrapped(checkpoint, s.running.change_id):
        return False
    if s.running.base is not None:  # committed once the checkpoint is no longer its base
        return checkpoint.id == s.running.base
    return s.plan.change_id == s.running.change_id or s.running.program not in (
        None,
        sql_fingerprint(checkpoint.program.text),
    )


def _not_started_as_wanted(s: Situation) -> bool:
    """A bootstrap driver whose pod has not started (no node takes it, say) while what it
    would do changed: new settings (the memory its `DriverUnschedulable` asked to lower), or
    a spec that no longer gives its change (reverted). It has done nothing, so it is stopped
    and started anew, or not at all; it held the pipeline until deleted by hand."""
    return (
        s.running.mode is DriverMode.BOOTSTRAP
        and s.running.phase == "Pending"
        and (_settings_changed(s) or s.plan.change_id != s.running.change_id)
    )


def _pause_changed(s: Situation) -> bool:
    return s.active and s.running.paused not in (None, s.observed.spec.paused)


def _settings_changed(s: Situation) -> bool:
    spec = s.observed.spec
    return s.active and (
        s.running.spark not in (None, spec.driver_fingerprint())
        or s.running.placement not in (None, spec.placement_fingerprint())
    )


def _program_unplanned(s: Situation) -> bool:
    """A driver running another program than the spec's where no checkpoint plans the change
    (before the driver's first one, or at a new spec.storage.uri)."""
    return (
        s.active
        and s.observed.checkpoint is None
        and s.running.program not in (None, s.observed.spec.sql_fingerprint())
    )


def _retrying(s: Situation) -> bool:
    return s.active and s.running.retrying is not None


def _retrying_message(s: Situation) -> str:
    said = s.running.retrying or "The driver is waiting to retry a step that storage refused."
    return (
        f"{said} It retries from the last checkpoint as spec.retry allows (its log shows each "
        "retry); once the retries are spent, the pipeline fails with the last refusal."
    )


def _failed_here(s: Situation) -> bool:
    driver = s.driver
    return (
        driver is not None
        and driver.phase == "Failed"
        and driver.reason != EVICTED  # the cluster stopped it: started again
        and not _moved_on(s)
        and (driver.generation == s.observed.generation)
        and not s.observed.restart_requested
    )


def _moved_on(s: Situation) -> bool:
    """A bootstrap driver that refused its change (`ChangeMoved`: a step or a restatement
    request moved it after approval) when the plan now gives another: it did nothing, so the
    pipeline awaits the approval of the change it now has, as its message says (it stayed
    `Failed` until a `restartNonce`). One whose change the plan still gives stays failed: the
    driver and the operator disagree, and starting it again would refuse again."""
    return s.running.reason == "ChangeMoved" and s.running.change_id != s.change


def _evicted(s: Situation) -> bool:
    """The driver of this generation was stopped by the cluster (`EVICTED`), not by itself."""
    driver = s.driver
    return driver is not None and driver.phase == "Failed" and driver.reason == EVICTED


def _restating_only(s: Situation) -> bool:
    plan = s.plan
    return bool(plan.restate) and plan.old_fingerprints.program == plan.new_fingerprints.program


def _approve_hint(s: Situation) -> str:
    return (
        f"Change {s.change} needs approval: annotate the pipeline with "
        f"{APPROVE_ANNOTATION}={s.change} (locally: spindle local approve {s.observed.name} "
        f"{s.change})."
    )


RETRY_HINT = (
    "Once the cause is fixed, change spec.restartNonce (or anything else in the spec) to start "
    "the driver again from the last checkpoint (locally: spindle local run)."
)
"""Closes the message of a failed driver: a Failed phase lasts until the spec changes, or
locally until the user runs the pipeline again."""

SQL_FIX_HINT = (
    "Fix the SQL where the message says and apply it: the new program is planned against the "
    "last checkpoint as any change is (locally: spindle local apply)."
)
"""Closes the message of a driver that failed on the program's SQL (`SQL_FAILURES`)."""

SQL_FAILURES = frozenset(
    {
        "UnknownColumn",
        "AmbiguousColumn",
        "UnknownFunction",
        "UngroupedColumn",
        "ColumnCountMismatch",
        "MisplacedAggregate",
        "MisplacedWindow",
        "UnorderedWindow",
        "OrdinalOutOfRange",
        "NestedAggregate",
        "DuplicateColumn",
        "TypeMismatch",
        "WrongArgumentCount",
        "OutputSchemaMismatch",
    }
)
"""Reasons Spark's analyzer gives a view (`runtime.maintain`), and an output that cannot hold
a view's rows: the SQL (the view, or its connector) is the fix, not a restart."""

SQL_OR_ROWS = frozenset({"SqlRuntimeError", "UnsupportedSql"})
"""Reasons of a view Spark could not evaluate, for its SQL or for its rows (a division by
zero, a failure of Spark's own): either fix applies."""


def _stalled_reason(s: Situation) -> str | None:
    return s.running.stalled[0] if s.running.stalled is not None else None


def _stalled(s: Situation) -> tuple[str, str]:
    assert s.running.stalled is not None
    return s.running.stalled


def _failure_message(s: Situation) -> str:
    said, reason = s.running.message or "The driver failed; see its logs.", s.running.reason
    if reason in SQL_FAILURES:
        return f"{said} {SQL_FIX_HINT}"
    if reason in SQL_OR_ROWS:
        return f"{said} {SQL_FIX_HINT} {RETRY_HINT}"
    return f"{said} {RETRY_HINT}"


RULES: tuple[Rule, ...] = (
    Rule(  # whoever deleted it (a stop, a restart, a lost node's eviction), it is not ending
        lambda s: s.driver is not None and _stalled_reason(s) == "DriverTerminating",
        Phase.STOPPING,
        Action.NONE,
        lambda s: _stalled(s)[0],
        lambda s: _stalled(s)[1],
    ),
    Rule(
        lambda s: _stopped(s) and s.observed.driver is not None and s.observed.driver.present,
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "Stopping",
        "Stopping the driver gracefully.",
    ),
    Rule(_stopped, Phase.STOPPED, Action.NONE, "Stopped", "desiredState is Stopped."),
    Rule(  # the operator ends a bootstrap only when desiredState says Stopped (above)
        lambda s: _bootstrapping(s) and s.running.ending,
        Phase.STOPPING,
        Action.NONE,
        "DriverDeleted",
        lambda s: (
            f"The driver bootstrapping change {s.running.change_id} is being deleted, not by "
            "Spindle (kubectl delete pod, a node drain): once it is gone, the bootstrap starts "
            "again while its approval stays."
        ),
    ),
    Rule(
        lambda s: _bootstrapping(s) and s.running.stalled is not None,
        Phase.BOOTSTRAPPING,
        Action.NONE,
        lambda s: _stalled(s)[0],
        lambda s: _stalled(s)[1],
    ),
    Rule(
        _bootstrapping,
        Phase.BOOTSTRAPPING,
        Action.NONE,
        "Bootstrapping",
        lambda s: f"Bootstrapping change {s.running.change_id}.",
    ),
    Rule(
        lambda s: s.active and _not_started_as_wanted(s) and _settings_changed(s),
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "DriverSettingsChanged",
        lambda s: (
            f"The driver to bootstrap change {s.running.change_id} has not started, and "
            "spec.spark, spec.retry, spec.storage or spec.serviceAccountName changed: starting "
            "it again with the new settings."
        ),
    ),
    Rule(
        lambda s: s.active and _not_started_as_wanted(s),
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "ProgramChanged",
        lambda s: (
            f"The spec no longer gives change {s.running.change_id}: stopping the driver "
            "that was to bootstrap it, before it started."
        ),
    ),
    Rule(
        lambda s: s.active and s.plan.needs_approval,
        Phase.STOPPING,
        Action.STOP_DRIVER,
        lambda s: "RestateRequested" if _restating_only(s) else "ProgramChanged",
        lambda s: (
            ("A restatement was requested" if _restating_only(s) else "The program changed")
            + ": stopping the driver at a checkpoint before planning the change."
        ),
    ),
    Rule(
        _program_unplanned,
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "ProgramChanged",
        "The program changed before the driver's first checkpoint here: stopping the driver, "
        "which runs the previous one.",
    ),
    Rule(
        _pause_changed,
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "DesiredStateChanged",
        lambda s: (
            "Restarting the driver at a checkpoint to "
            f"{'pause' if s.observed.spec.paused else 'resume'} ingestion."
        ),
    ),
    Rule(
        _settings_changed,
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "DriverSettingsChanged",
        "spec.spark, spec.retry, spec.storage or spec.serviceAccountName changed: restarting "
        "the driver at a checkpoint with the new settings.",
    ),
    Rule(  # after the rules that stop a driver: their reasons say why it ends
        lambda s: s.active and s.running.ending,
        Phase.STOPPING,
        Action.NONE,
        "DriverDeleted",
        "The driver is being deleted (kubectl delete pod, a node drain, or a restart Spindle "
        "asked for that the spec no longer needs): it stops at a checkpoint, and the next "
        "driver starts once it is gone.",
    ),
    Rule(
        lambda s: s.active and s.running.stalled is not None,
        Phase.PENDING,
        Action.NONE,
        lambda s: _stalled(s)[0],
        lambda s: _stalled(s)[1],
    ),
    Rule(
        lambda s: s.active and s.running.phase == "Pending",
        Phase.PENDING,
        Action.NONE,
        "Starting",
        "The driver is starting.",
    ),
    Rule(
        _retrying,
        lambda s: Phase.PAUSED if s.observed.spec.paused else Phase.RUNNING,
        Action.NONE,
        RETRYING,
        _retrying_message,
    ),
    Rule(
        lambda s: s.active and s.observed.spec.paused,
        Phase.PAUSED,
        Action.NONE,
        Phase.PAUSED.value,
        "Ingestion is paused.",
        ready=True,
    ),
    Rule(
        lambda s: s.active,
        Phase.RUNNING,
        Action.NONE,
        Phase.RUNNING.value,
        "The driver is running.",
        ready=True,
    ),
    Rule(
        _failed_here,
        Phase.FAILED,
        Action.NONE,
        lambda s: s.running.reason or "DriverFailed",
        _failure_message,
    ),
    Rule(
        lambda s: not s.plan.needs_approval and _evicted(s),
        Phase.PENDING,
        Action.START_RUN,
        EVICTED,
        lambda s: s.running.message or "The cluster stopped the driver pod.",
    ),
    Rule(
        lambda s: not s.plan.needs_approval,
        Phase.PENDING,
        Action.START_RUN,
        "Starting",
        "Starting the driver.",
    ),
    Rule(
        lambda s: not s.plan.bootstrap.allowed,
        Phase.FAILED,
        Action.NONE,
        lambda s: s.plan.bootstrap.error_code or "BootstrapRefused",
        lambda s: s.plan.bootstrap.message or "The change cannot be bootstrapped.",
        shows_change=True,
    ),
    Rule(
        lambda s: s.policy is BootstrapPolicy.REJECT,
        Phase.STOPPED,
        Action.NONE,
        "BootstrapRejected",
        lambda s: (
            f"The program changed (change {s.change}) and bootstrapPolicy is reject; the "
            "checkpoint is untouched. Revert the change or set bootstrapPolicy to await_approval "
            "or allow."
        ),
        shows_change=True,
    ),
    Rule(
        lambda s: s.policy is BootstrapPolicy.ALLOW or s.observed.approval == s.change,
        Phase.BOOTSTRAPPING,
        Action.START_BOOTSTRAP,
        lambda s: EVICTED if _evicted(s) else "Bootstrapping",
        lambda s: (
            (f"{s.running.message} " if _evicted(s) and s.running.message else "")
            + f"Bootstrapping change {s.change}."
        ),
        shows_change=True,
    ),
    Rule(
        lambda s: True,
        Phase.AWAITING_APPROVAL,
        Action.NONE,
        "AwaitingApproval",
        _approve_hint,
        shows_change=True,
    ),
)


def pending_change(plan: ChangePlan) -> PendingChange:
    body = plan.to_json()
    return PendingChange(
        id=plan.change_id,
        diff=ChangeDiff.model_validate(plan.diff.to_json()),
        changes=body["changes"],
        bootstrap=body["bootstrap"],
        estimate=plan.estimate.to_json() if plan.estimate else None,
        reason=RESTATE if plan.restate else None,
    )


def rates(checkpoint: Manifest | None) -> tuple[Rate, ...]:
    """The throughput the checkpoint's history recorded: the latest bootstrap's and step's."""
    if checkpoint is None:
        return ()
    return tuple(
        Rate(kind=kind, rows=record.rows, seconds=record.seconds)
        for kind, record in sorted(checkpoint.throughput.items())
    )


def restatement(observed: Observation, program: Program) -> tuple[str, ...] | Decision:
    """The views a restatement request names, none when it was served (the checkpoint records
    it), or the failure naming what is not a view."""
    request = observed.restate
    checkpoint = observed.checkpoint
    if not request or checkpoint is None or checkpoint.restated == request:
        return ()
    # as SQL reads a name: as written if a view has it, else folded (an unquoted name)
    names = tuple(n if n in program.views else n.lower() for n in restate_views(request))
    unknown = [n for n in names if n not in program.views]
    if unknown or not names:
        views = ", ".join(program.views) or "none"
        return failed(
            "UnknownRelation",
            f"The restatement request names {', '.join(repr(n) for n in unknown) or 'no view'}"
            f", which is not a view of spec.sql (its views: {views}). Fix or remove the "
            f"{RESTATE_ANNOTATION} annotation (locally: spindle local restate "
            f"{observed.name} VIEW...).",
        )
    return names


def _apply(rule: Rule, s: Situation) -> Decision:
    return Decision(
        rule.phase if isinstance(rule.phase, Phase) else rule.phase(s),
        rule.action,
        ready=rule.ready,
        reason=_text(rule.reason, s),
        message=_text(rule.message, s),
        pending_change=pending_change(s.plan) if rule.shows_change else None,
        change_id=s.change,
        plan=s.plan,
        program=s.program,
    )


def _not_running(decision: Decision, observed: Observation) -> Decision:
    what = "bootstraps the approved change" if decision.mode is DriverMode.BOOTSTRAP else "runs it"
    return Decision(
        Phase.STOPPED,
        Action.NONE,
        ready=False,
        reason="NotRunning",
        message=f"No run is in progress; `spindle local run {observed.name}` {what}.",
        pending_change=decision.pending_change,
        change_id=decision.change_id,
        plan=decision.plan,
        program=decision.program,
    )


MEMO_TEXT = 2 * MAX_PROGRAM_BYTES
"""The program text, in characters, each memo keeps parsed programs or plans for: the largest
pipeline's program and its checkpoint's (one plan, two programs), or a fleet of 2,000 pipelines
of 1 KB programs. A parsed program of the usual kind takes about 60 bytes a character (dense
expressions take several times more, see docs/limits.md), so about 250 MB when full."""

_parsed = memoized(budget=MEMO_TEXT)(parse_program)
"""Programs are immutable, and each decision reads the spec's and the checkpoint's."""


@memoized(budget=MEMO_TEXT)
def _plan(
    *,
    new: str,
    old: str | None,
    old_runtime: str | None,
    runtime: str,
    old_translation: int | None,
    restate: tuple[str, ...],
    restate_request: str | None,
    sizes: tuple[tuple[str, StoredSize], ...] | None,
    rates: tuple[Rate, ...],
    outputs_mode: str,
) -> ChangePlan:
    """`make_plan` from the texts (both already parsed once) and what the checkpoint recorded,
    memoized: a plan is a pure function of these, and an operator plans each pipeline's
    unchanged program against its unchanged checkpoint again at every reconcile."""
    return make_plan(
        old=None if old is None else _parsed(old),
        new=_parsed(new),
        old_runtime=old_runtime,
        runtime=runtime,
        old_translation=old_translation,
        restate=restate,
        restate_request=restate_request,
        stored=Stored(
            sizes=None if sizes is None else dict(sizes), rates=rates, outputs_mode=outputs_mode
        ),
    )


def _sizes(sizes: Mapping[str, StoredSize] | None) -> tuple[tuple[str, StoredSize], ...] | None:
    return None if sizes is None else tuple(sorted(sizes.items()))


PASSING = ("StorageUnavailable",)
"""Problems of the operator's own observation that pass by themselves (its read of the
checkpoint timed out): a driver that runs is not failed for them."""


def _unobserved_while_running(observed: Observation, driver: ObservedDriver) -> Decision:
    """A running driver's pipeline the operator could not observe this time: the driver's
    phase, not Ready, with why (it was `Failed`, with a Warning Event, while the driver ran
    on; Argo CD showed it Degraded)."""
    assert observed.problem is not None
    if driver.mode is DriverMode.BOOTSTRAP:
        phase = Phase.BOOTSTRAPPING
    else:
        phase = Phase.PAUSED if observed.spec.paused else Phase.RUNNING
    message = f"{observed.problem.message} The driver runs on; the operator reads again shortly."
    reason = observed.problem.reason
    return Decision(phase, Action.NONE, ready=False, reason=reason, message=message)


def situation(observed: Observation) -> Situation | Decision:
    """The program and plan to decide on, or the failure that prevents them."""
    driver = observed.driver
    stop = observed.spec.desired_state is DesiredState.STOPPED and (
        driver is not None and driver.present
    )  # what cannot be observed does not keep a driver the user stopped
    if observed.problem is not None:
        if not stop and driver is not None and driver.active and observed.problem.reason in PASSING:
            return _unobserved_while_running(observed, driver)
        return failed(observed.problem.reason, observed.problem.message, stop=stop)
    pinned = observed.spec.runtime_version
    if pinned is not None and pinned not in SUPPORTED_RUNTIME_VERSIONS:
        return failed(
            "InvalidSpec",
            f"spec.runtimeVersion: {pinned!r} is not a runtime this Spindle has (it has "
            f"{', '.join(SUPPORTED_RUNTIME_VERSIONS)}). Pin one of those, or remove "
            "spec.runtimeVersion to use the current one.",
            stop=stop,
        )
    halt = stop or (driver is not None and driver.active)  # a failure stops a running driver
    checkpoint = observed.checkpoint
    try:
        program = _parsed(observed.spec.sql)
        program.refuse_unrunnable(references=not observed.spark_ran)  # what the runtime refuses
    except SpindleError as error:
        count = int(error.details.get("problems") or 1)
        more = f" The first of {count} problems; `spindle plan -f` lists them all." * (count > 1)
        return failed(error.reason, error.message + more, stop=halt)
    if not program.tables and not program.views:  # a templating or indentation slip
        return failed(
            "InvalidSpec",
            "spec.sql declares no table and no view"
            + (" (it is empty)" if not observed.spec.sql.strip() else "")
            + ": give the pipeline its program (CREATE TABLE and CREATE VIEW statements).",
            stop=halt,
        )
    if checkpoint is not None:
        try:
            _parsed(checkpoint.program.text)
        except SpindleError as error:
            return failed(
                "CheckpointProgramUnreadable",
                f"The checkpointed program no longer parses ({error.message}); start the "
                "pipeline from an older checkpoint (spec.storage.startFrom), or start it over "
                "without its stored state (a new spec.storage.uri).",
                stop=halt,
            )
    restate = restatement(observed, program)
    if isinstance(restate, Decision):
        return replace(restate, action=Action.STOP_DRIVER) if stop else restate
    plan = _plan(
        new=observed.spec.sql,
        old=None if checkpoint is None else checkpoint.program.text,
        old_runtime=checkpoint.runtime_version if checkpoint else None,
        runtime=observed.spec.runtime_version or observed.runtime_version,
        old_translation=checkpoint.translation_revision if checkpoint else None,
        restate=restate,
        restate_request=observed.restate,
        sizes=_sizes(observed.sizes),
        rates=rates(checkpoint),
        outputs_mode=observed.spec.outputs.on_bootstrap,
    )
    return Situation(observed, program, plan)


def decide(observed: Observation) -> Decision:
    found = situation(observed)
    if isinstance(found, Decision):
        return found
    rule = next(r for r in RULES if r.when(found))
    decision = _apply(rule, found)
    if decision.starts_driver and not observed.start_requested:
        return _not_running(decision, observed)
    if preview_wanted(decision, observed):
        return replace(decision, preview=observed.preview_request)
    return decision


def preview_wanted(decision: Decision, observed: Observation) -> bool:
    """A preview request for the pending change that no report and no preview pod serves yet
    (a request is served once: to preview again, change its label)."""
    request = observed.preview_request
    if decision.phase is not Phase.AWAITING_APPROVAL or not request:
        return False
    if request_change(request) != decision.change_id or observed.previewing is not None:
        return False
    if observed.preview_refused is not None:
        return False
    report = observed.preview
    return report is None or report.request != request


def serving_preview(decision: Decision, observed: Observation) -> str | None:
    """The one preview request whose pod may run: the request for the pending change while it
    awaits approval. Any other preview pod is stale (a relabelled request's, or one of a change
    approved, moved or withdrawn): one no node took stayed Pending for good, counted against
    the namespace's quota, and could start later, beside the driver. None: no preview pod may
    run."""
    request = observed.preview_request
    if decision.phase is not Phase.AWAITING_APPROVAL or not request:
        return None
    return request if request_change(request) == decision.change_id else None


def decide_start(observed: Observation, *, bootstrap_of: str | None = None) -> Decision:
    """The decision of a body that was asked to start a driver (`spindle local run`, a driver
    pod): one that starts it, or the error that says why not. `bootstrap_of` is the change a
    driver pod was started to bootstrap: a plan that now gives another change is refused
    (`ChangeMoved`), so a change that moved after approval is never bootstrapped; one already
    bootstrapped just runs."""
    decision = decide(observed)
    moved = bootstrap_of is not None and decision.mode is not DriverMode.BOOTSTRAP
    if moved and not bootstrapped(observed.checkpoint, bootstrap_of):
        raise SpindleError(
            reason="ChangeMoved",
            message=f"This driver was started to bootstrap change {bootstrap_of}, but the "
            f"checkpoint and program now give change {decision.change_id}; nothing was "
            "done. Approve the pending change instead.",
        )
    if not decision.starts_driver:
        raise decision.refusal()
    return decision
