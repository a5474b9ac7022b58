"""Every transition of the pure lifecycle, one test each (no I/O)."""

from __future__ import annotations

import datetime
from dataclasses import replace
from pathlib import Path

import pytest

from spindle.api import BootstrapPolicy, DesiredState, Phase, PipelineSpec
from spindle.api.types import RetrySpec
from spindle.checkpoint import BootstrapRecord, Manifest, PipelineRef
from spindle.checkpoint.records import program_record
from spindle.errors import SpindleError
from spindle.lifecycle import (
    Action,
    DriverMode,
    Observation,
    ObservedDriver,
    conclude,
    decide,
    decide_start,
)
from spindle.lifecycle.rules import RETRY_HINT, SQL_FAILURES, SQL_FIX_HINT
from spindle.program import parse_program
from spindle.versions import PARSER_VERSION, PLAN_FORMAT_VERSION, RUNTIME_VERSION

V1 = Path("examples/grades/v1.sql").read_text()
V2 = Path("examples/grades/v2.sql").read_text()
NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.UTC)


def checkpoint(sql: str = V1, *, bootstrap: str | None = None) -> Manifest:
    return Manifest(
        id="00000001-aaaaaa",
        parent=None,
        sequence=1,
        created_at=NOW,
        pipeline=PipelineRef(namespace="default", name="grades"),
        program=program_record(parse_program(sql)),
        parser_version=PARSER_VERSION,
        plan_format_version=PLAN_FORMAT_VERSION,
        runtime_version=RUNTIME_VERSION,
        bootstrap=None
        if bootstrap is None
        else BootstrapRecord(change_id=bootstrap, started_at=NOW, finished_at=NOW),
    )


def spec(sql: str = V2, **fields: object) -> PipelineSpec:
    return PipelineSpec(sql=sql, **fields)  # type: ignore[arg-type]


def observe(**fields: object) -> Observation:
    base: dict[str, object] = {"spec": spec(), "generation": 2, "checkpoint": checkpoint()}
    base.update(fields)
    return Observation(**base)  # type: ignore[arg-type]


CHANGE = decide(observe()).change_id


def test_first_start_runs_without_approval() -> None:
    decision = decide(observe(checkpoint=None))
    assert (decision.phase, decision.action) == (Phase.PENDING, Action.START_RUN)


def test_unchanged_program_runs() -> None:
    decision = decide(observe(spec=spec(V1)))
    assert (decision.phase, decision.action) == (Phase.PENDING, Action.START_RUN)
    assert decision.pending_change is None


def test_change_awaits_approval_with_the_feldera_diff() -> None:
    decision = decide(observe())
    assert (decision.phase, decision.action) == (Phase.AWAITING_APPROVAL, Action.NONE)
    assert decision.pending_change is not None and decision.pending_change.id == CHANGE
    assert decision.pending_change.diff.program_diff.added_views == ["avg_grade_all_courses"]
    assert decision.reason == "AwaitingApproval"


def test_matching_approval_starts_the_bootstrap() -> None:
    decision = decide(observe(approval=CHANGE))
    assert (decision.phase, decision.action) == (Phase.BOOTSTRAPPING, Action.START_BOOTSTRAP)


def test_other_approval_is_ignored_with_an_event_naming_the_pending_id() -> None:
    observed = observe(approval="0123456789ab")
    decision = decide(observed)
    assert decision.action is Action.NONE and decision.phase is Phase.AWAITING_APPROVAL
    events = conclude(decision, observed, driver=None, now="t").events
    assert [e.reason for e in events] == ["ApprovalIgnored"] and CHANGE in events[0].message


def test_stale_approval_of_the_last_bootstrap_is_ignored_silently() -> None:
    observed = observe(approval="0123456789ab", last_bootstrap="0123456789ab")
    decision = decide(observed)
    assert decision.action is Action.NONE
    assert conclude(decision, observed, driver=None, now="t").events == ()


def test_allow_policy_bootstraps_without_approval() -> None:
    decision = decide(observe(spec=spec(bootstrapPolicy=BootstrapPolicy.ALLOW)))
    assert decision.action is Action.START_BOOTSTRAP


def test_reject_policy_stops_with_bootstrap_rejected() -> None:
    decision = decide(observe(spec=spec(bootstrapPolicy=BootstrapPolicy.REJECT)))
    assert (decision.phase, decision.action) == (Phase.STOPPED, Action.NONE)
    assert decision.reason == "BootstrapRejected"


def test_invalid_program_fails_with_line_and_column() -> None:
    decision = decide(observe(spec=spec("create view v as select x from nope;")))
    assert decision.phase is Phase.FAILED and decision.reason == "UnknownRelation"
    assert "line 1, column" in decision.message


def test_invalid_program_stops_a_running_driver() -> None:
    driver = ObservedDriver(mode=DriverMode.RUN, generation=1, phase="Running")
    decision = decide(observe(spec=spec("create view"), driver=driver))
    assert decision.action is Action.STOP_DRIVER


def test_refused_change_fails_with_the_plan_reason() -> None:
    late = "create table ev (ts timestamp lateness interval 1 hour) with ('materialized'='true');"
    decision = decide(
        observe(
            spec=spec(late + "create view c as select count(*) as n from ev;"),
            checkpoint=checkpoint(late),
            approval=None,
        )
    )
    assert decision.phase is Phase.FAILED and decision.reason == "LatenessNotBootstrappable"


def test_running_driver_is_running_or_paused() -> None:
    driver = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running")
    assert decide(observe(spec=spec(V1), driver=driver)).phase is Phase.RUNNING
    paused = decide(observe(spec=spec(V1, desiredState=DesiredState.PAUSED), driver=driver))
    assert paused.phase is Phase.PAUSED


def test_a_driver_deleted_by_someone_else_is_stopping_and_the_operators_stops_keep_why() -> None:
    """A driver pod deleted with `kubectl delete pod` (or drained) showed Running, Ready,
    until it was gone; a stop the operator asked for keeps the reason it was asked for."""
    running = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running", ending=True)
    deleted = decide(observe(spec=spec(V1), driver=running))
    assert (deleted.phase, deleted.action, deleted.ready) == (Phase.STOPPING, Action.NONE, False)
    assert deleted.reason == "DriverDeleted" and "next driver starts" in deleted.message
    bootstrapping = replace(running, mode=DriverMode.BOOTSTRAP, change_id=CHANGE)
    ended = decide(observe(driver=bootstrapping, approval=CHANGE))
    assert (ended.phase, ended.reason) == (Phase.STOPPING, "DriverDeleted")
    assert "bootstrap starts again" in ended.message
    stopped = decide(observe(spec=spec(V1), driver=replace(running, generation=1)))
    assert (stopped.phase, stopped.reason) == (Phase.STOPPING, "DriverDeleted")
    edited = decide(observe(driver=running))
    assert (edited.phase, edited.reason) == (Phase.STOPPING, "ProgramChanged")


def test_a_driver_waiting_to_retry_a_step_is_running_and_not_ready_with_a_warning_once() -> None:
    """A retrying driver is still the pipeline's driver (`Running`, nothing to act on), but
    the status no longer says all is well: `StepRetrying`, with the driver's own line when the
    body has it (locally) and what happens next, and one Warning Event per episode."""
    from spindle.lifecycle import conclude

    line = "Step 4 failed (StorageUnavailable): ... Retry 2 of 5 in 4 s, from checkpoint c."
    for said, shown in ((line, line), ("", "The driver is waiting to retry a step")):
        driver = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running", retrying=said)
        observed = observe(spec=spec(V1), driver=driver)
        decision = decide(observed)
        assert (decision.phase, decision.action) == (Phase.RUNNING, Action.NONE)
        assert (decision.ready, decision.reason) == (False, "StepRetrying")
        assert decision.message.startswith(shown)
        assert "once the retries are spent, the pipeline fails" in decision.message
        first = conclude(decision, observed, driver=None, now="t1")
        assert [(e.type, e.reason) for e in first.events] == [("Warning", "StepRetrying")]
        again = conclude(decision, replace(observed, previous=first.status), driver=None, now="t2")
        assert again.events == ()
        recovered = replace(observed, driver=replace(driver, retrying=None), previous=first.status)
        back = decide(recovered)
        assert (back.phase, back.ready, back.reason) == (Phase.RUNNING, True, "Running")
    paused = decide(observe(spec=spec(V1, desiredState=DesiredState.PAUSED), driver=driver))
    assert (paused.phase, paused.ready, paused.reason) == (Phase.PAUSED, False, "StepRetrying")


def test_program_change_stops_a_running_driver_gracefully() -> None:
    decision = decide(
        observe(driver=ObservedDriver(mode=DriverMode.RUN, generation=1, phase="Running"))
    )
    assert (decision.phase, decision.action) == (Phase.STOPPING, Action.STOP_DRIVER)
    assert decision.reason == "ProgramChanged"


def test_bootstrapping_until_the_checkpoint_records_it_then_running() -> None:
    driver = ObservedDriver(
        mode=DriverMode.BOOTSTRAP, generation=2, phase="Running", change_id=CHANGE
    )
    assert decide(observe(driver=driver, approval=CHANGE)).phase is Phase.BOOTSTRAPPING
    done = decide(observe(driver=driver, checkpoint=checkpoint(V2, bootstrap=CHANGE)))
    assert (done.phase, done.action) == (Phase.RUNNING, Action.NONE)


def test_a_bootstrap_driver_that_went_on_stepping_is_running_and_a_new_edit_stops_it() -> None:
    """A bootstrap driver runs the pipeline once its bootstrap committed, and the checkpoints of
    its later steps record no bootstrap. It was `Bootstrapping` again from its first step on,
    for as long as it lived, and an SQL edit, a pause or new settings waited for it forever."""
    sql_label = spec(V2).sql_fingerprint()
    driver = ObservedDriver(
        mode=DriverMode.BOOTSTRAP,
        generation=2,
        phase="Running",
        change_id=CHANGE,
        program=sql_label,
        paused=False,
    )
    stepped = checkpoint(V2)  # a step after the bootstrap's checkpoint
    running = decide(observe(driver=driver, checkpoint=stepped, approval=CHANGE))
    assert (running.phase, running.action, running.reason) == (
        Phase.RUNNING,
        Action.NONE,
        "Running",
    )
    v3 = V2.replace("2026-06-10", "2026-06-30")
    edited = decide(observe(spec=spec(v3), generation=3, driver=driver, checkpoint=stepped))
    assert (edited.phase, edited.action, edited.reason) == (
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "ProgramChanged",
    )
    paused = decide(
        observe(spec=spec(V2, desiredState="Paused"), driver=driver, checkpoint=stepped)
    )
    assert (paused.action, paused.reason) == (Action.STOP_DRIVER, "DesiredStateChanged")
    # an edit while it bootstraps (its checkpoint still holds the old program) waits for it
    waiting = decide(observe(spec=spec(v3), generation=3, driver=driver, approval=CHANGE))
    assert (waiting.phase, waiting.action) == (Phase.BOOTSTRAPPING, Action.NONE)
    assert waiting.message == f"Bootstrapping change {CHANGE}."


def test_a_bootstrap_is_done_once_the_checkpoint_is_no_longer_the_one_it_started_from() -> None:
    """A restatement's or a runtime upgrade's bootstrap keeps the program as it was: the
    checkpoint holds the driver's program before it commits too. The driver's pod says which
    checkpoint its change was planned from (`ObservedDriver.base`): until another is the
    latest, an edit waits for it; after, it runs the pipeline."""
    restating = Observation(
        spec=spec(V1), generation=2, checkpoint=checkpoint(V1), restate="avg_grade@1"
    )
    change = decide(restating).change_id
    driver = ObservedDriver(
        mode=DriverMode.BOOTSTRAP,
        generation=2,
        phase="Running",
        change_id=change,
        program=spec(V1).sql_fingerprint(),
        base=checkpoint(V1).id,
        paused=False,
    )
    v1_edited = V1 + "\ncreate view extra as select * from avg_grade;\n"
    for edit in (
        replace(restating, restate="avg_grade@2"),
        replace(restating, spec=spec(v1_edited)),
    ):
        waiting = decide(replace(edit, driver=driver))
        assert (waiting.phase, waiting.action) == (Phase.BOOTSTRAPPING, Action.NONE)
    stepped = checkpoint(V1).model_copy(update={"id": "00000003-bbbbbb", "restated": "avg_grade@1"})
    done = decide(replace(restating, driver=driver, checkpoint=stepped))
    assert (done.phase, done.reason) == (Phase.RUNNING, "Running")


def test_a_bootstrap_driver_not_started_is_started_anew_when_what_it_would_do_changed() -> None:
    """A bootstrap pod no node takes says to lower its memory; lowering it, or reverting the
    SQL, changed nothing while the pod waited (only deleting it by hand did). It has done
    nothing yet: it is stopped, then started with the new settings, or not at all."""
    wanted = spec(V2, spark={"driver": {"memory": "64Gi"}})
    stalled = ObservedDriver(
        mode=DriverMode.BOOTSTRAP,
        generation=2,
        phase="Pending",
        change_id=CHANGE,
        spark=wanted.driver_fingerprint(),
        program=wanted.sql_fingerprint(),
        stalled=("DriverUnschedulable", "No node can take the driver pod."),
    )
    waiting = decide(observe(spec=wanted, driver=stalled, approval=CHANGE))
    assert (waiting.phase, waiting.reason) == (Phase.BOOTSTRAPPING, "DriverUnschedulable")
    lowered = spec(V2, spark={"driver": {"memory": "2Gi"}})
    again = decide(observe(spec=lowered, generation=3, driver=stalled, approval=CHANGE))
    assert (again.action, again.reason) == (Action.STOP_DRIVER, "DriverSettingsChanged")
    assert again.message.startswith(f"The driver to bootstrap change {CHANGE} has not started")
    reverted = spec(V1, spark={"driver": {"memory": "64Gi"}})
    withdrawn = decide(observe(spec=reverted, generation=3, driver=stalled, approval=CHANGE))
    assert (withdrawn.action, withdrawn.reason) == (Action.STOP_DRIVER, "ProgramChanged")
    # one that started finishes its bootstrap first, whatever changed meanwhile
    started = replace(stalled, phase="Running", stalled=None)
    kept = decide(observe(spec=lowered, generation=3, driver=started, approval=CHANGE))
    assert (kept.phase, kept.action) == (Phase.BOOTSTRAPPING, Action.NONE)


def test_storage_the_operator_could_not_read_leaves_a_running_driver_its_phase() -> None:
    """The operator's read of the checkpoint timing out made a pipeline whose driver ran on
    `Failed`, with a Warning Event (Argo CD: Degraded). It keeps the driver's phase, not
    Ready, saying why; with no driver, or for a problem that does not pass, it fails."""
    from spindle.lifecycle.observation import Unobservable

    blip = Unobservable("StorageUnavailable", "The checkpoint store did not answer.")
    driver = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running")
    running = decide(observe(spec=spec(V1), driver=driver, problem=blip))
    assert (running.phase, running.action, running.ready) == (Phase.RUNNING, Action.NONE, False)
    assert running.reason == "StorageUnavailable" and "The driver runs on" in running.message
    report = conclude(
        running, observe(spec=spec(V1), driver=driver, problem=blip), driver=None, now="t"
    )
    assert report.events == ()
    bootstrap = replace(driver, mode=DriverMode.BOOTSTRAP, change_id=CHANGE)
    assert decide(observe(driver=bootstrap, problem=blip)).phase is Phase.BOOTSTRAPPING
    assert decide(observe(spec=spec(V1), problem=blip)).phase is Phase.FAILED
    missing = Unobservable("SecretNotFound", "No Secret s3-credentials.")
    assert decide(observe(spec=spec(V1), driver=driver, problem=missing)).phase is Phase.FAILED


def test_stopped_desired_state_stops_then_is_stopped() -> None:
    driver = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running")
    stopping = decide(observe(spec=spec(desiredState=DesiredState.STOPPED), driver=driver))
    assert (stopping.phase, stopping.action) == (Phase.STOPPING, Action.STOP_DRIVER)
    stopped = decide(observe(spec=spec(desiredState=DesiredState.STOPPED)))
    assert (stopped.phase, stopped.action) == (Phase.STOPPED, Action.NONE)


def test_failed_driver_fails_until_the_spec_changes() -> None:
    driver = ObservedDriver(
        mode=DriverMode.RUN,
        generation=2,
        phase="Failed",
        reason="UnsupportedSql",
        message="Spark cannot evaluate view",
    )
    failed = decide(observe(spec=spec(V1), driver=driver))
    assert failed.phase is Phase.FAILED and failed.reason == "UnsupportedSql"
    assert failed.message == f"Spark cannot evaluate view {SQL_FIX_HINT} {RETRY_HINT}"
    analyzed = replace(driver, reason="TypeMismatch", message="Types do not mix.")
    mismatch = decide(observe(spec=spec(V1), driver=analyzed))
    assert mismatch.message == f"Types do not mix. {SQL_FIX_HINT}"  # the SQL is the fix
    storage = replace(driver, reason="StorageRefused", message="Storage refused a write.")
    refused = decide(observe(spec=spec(V1), driver=storage))
    assert refused.message == f"Storage refused a write. {RETRY_HINT}"
    retried = decide(observe(spec=spec(V1), driver=driver, generation=3))
    assert retried.action is Action.START_RUN
    nonce = decide(observe(spec=spec(V1, restartNonce=1), driver=driver, generation=3))
    assert nonce.action is Action.START_RUN
    run_again = decide(observe(spec=spec(V1), driver=driver, restart_requested=True))
    assert run_again.action is Action.START_RUN  # `spindle local run` after a failure


def test_a_new_restart_nonce_leaves_a_running_driver_alone() -> None:
    driver = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running", paused=False)
    running = decide(observe(spec=spec(V1, restartNonce=4), driver=driver, generation=3))
    assert (running.phase, running.action) == (Phase.RUNNING, Action.NONE)


def test_runtime_upgrade_is_a_change_unless_pinned() -> None:
    upgraded = decide(observe(spec=spec(V1), runtime_version="v2"))
    assert upgraded.phase is Phase.AWAITING_APPROVAL
    pinned = decide(observe(spec=spec(V1, runtimeVersion=RUNTIME_VERSION), runtime_version="v2"))
    assert pinned.action is Action.START_RUN


def test_pausing_or_resuming_restarts_a_driver_started_the_other_way() -> None:
    unpaused = ObservedDriver(mode=DriverMode.RUN, generation=1, phase="Running", paused=False)
    pause = decide(observe(spec=spec(V1, desiredState=DesiredState.PAUSED), driver=unpaused))
    assert (pause.phase, pause.action, pause.reason) == (
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "DesiredStateChanged",
    )
    paused = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running", paused=True)
    held = decide(observe(spec=spec(V1, desiredState=DesiredState.PAUSED), driver=paused))
    assert (held.phase, held.action) == (Phase.PAUSED, Action.NONE)
    resume = decide(observe(spec=spec(V1), driver=paused))
    assert resume.action is Action.STOP_DRIVER and "resume" in resume.message


def test_changed_spark_settings_restart_the_driver_at_a_checkpoint() -> None:
    started = spec(V1)
    driver = ObservedDriver(
        mode=DriverMode.RUN, generation=1, phase="Running", spark=started.driver_fingerprint()
    )
    same = decide(observe(spec=started, checkpoint=checkpoint(V1), driver=driver))
    assert (same.phase, same.action) == (Phase.RUNNING, Action.NONE)
    bigger = spec(V1, spark={"driver": {"memory": "2Gi"}})
    patient = spec(V1, retry={"attempts": 10})
    assert len({s.driver_fingerprint() for s in (started, bigger, patient)}) == 3
    for changed in (bigger, patient):
        restart = decide(
            observe(spec=changed, generation=2, checkpoint=checkpoint(V1), driver=driver)
        )
        assert (restart.phase, restart.action, restart.reason) == (
            Phase.STOPPING,
            Action.STOP_DRIVER,
            "DriverSettingsChanged",
        )
    unknown = ObservedDriver(mode=DriverMode.RUN, generation=1, phase="Running")  # local run
    kept = decide(observe(spec=bigger, generation=2, checkpoint=checkpoint(V1), driver=unknown))
    assert (kept.phase, kept.action) == (Phase.RUNNING, Action.NONE)


def test_a_new_storage_or_service_account_restarts_the_driver_at_a_checkpoint() -> None:
    """The driver reads spec.storage and runs as spec.serviceAccountName: a change of either
    restarts it (with a new spec.storage.uri it starts over there), but not one of what a
    running driver does not read."""
    started = spec(V1, storage={"uri": "s3://b/one"})
    driver = ObservedDriver(
        mode=DriverMode.RUN,
        generation=1,
        phase="Running",
        spark=started.driver_fingerprint(),
        placement=started.placement_fingerprint(),
        program=started.sql_fingerprint(),
    )
    elsewhere = spec(V1, storage={"uri": "s3://b/two"})
    other_account = spec(V1, storage={"uri": "s3://b/one"}, serviceAccountName="driver-2")
    for changed in (elsewhere, other_account):
        restart = decide(observe(spec=changed, checkpoint=checkpoint(V1), driver=driver))
        assert (restart.action, restart.reason) == (Action.STOP_DRIVER, "DriverSettingsChanged")
        assert "spec.storage or spec.serviceAccountName" in restart.message
    bootstrapping = replace(driver, mode=DriverMode.BOOTSTRAP, change_id="0123456789ab")
    for seen in (None, checkpoint(V1)):  # the new location has no checkpoint, or another
        moved = decide(observe(spec=elsewhere, checkpoint=seen, driver=bootstrapping))
        assert (moved.action, moved.reason) == (Action.STOP_DRIVER, "DriverSettingsChanged")
    # a bootstrap (of V1 -> V2) at the same location finishes first, whatever else changed
    other_account = spec(V2, storage={"uri": "s3://b/one"}, serviceAccountName="driver-2")
    bootstrapping = replace(bootstrapping, change_id=CHANGE, program=spec(V2).sql_fingerprint())
    kept_on = decide(observe(spec=other_account, checkpoint=checkpoint(V1), driver=bootstrapping))
    assert (kept_on.phase, kept_on.action) == (Phase.BOOTSTRAPPING, Action.NONE)
    unread = spec(V1, storage={"uri": "s3://b/one", "deleteOnPipelineDeletion": True})
    kept = decide(observe(spec=unread, checkpoint=checkpoint(V1), driver=driver))
    assert (kept.phase, kept.action) == (Phase.RUNNING, Action.NONE)


def test_stopped_deletes_a_lingering_driver_whatever_the_program() -> None:
    """A pod stuck pulling its image may yet start: Stopped deletes it, also while the spec's
    program is invalid."""
    stuck = ObservedDriver(mode=DriverMode.RUN, generation=1, phase="Failed", lingering=True)
    stopped = spec("create view", desiredState=DesiredState.STOPPED)
    decision = decide(observe(spec=stopped, checkpoint=checkpoint(V1), driver=stuck))
    assert decision.action is Action.STOP_DRIVER, decision
    running = decide(observe(spec=spec("create view"), checkpoint=checkpoint(V1), driver=stuck))
    assert running.action is Action.NONE
    active = ObservedDriver(mode=DriverMode.RUN, generation=1, phase="Running")
    stopped = spec(V1, desiredState=DesiredState.STOPPED)
    unknown_view = observe(spec=stopped, checkpoint=checkpoint(V1), driver=active, restate="nope")
    assert decide(unknown_view).action is Action.STOP_DRIVER  # an invalid restate too


def test_a_program_changed_before_the_first_checkpoint_restarts_the_driver() -> None:
    """No checkpoint plans the change (the driver has not committed one yet, or storage moved
    to a new uri): the driver running the previous program is stopped, not left running it
    while the status shows the new program's hash."""
    started = spec(V1)
    driver = ObservedDriver(
        mode=DriverMode.RUN, generation=1, phase="Running", program=started.sql_fingerprint()
    )
    same = decide(observe(spec=started, checkpoint=None, driver=driver))
    assert (same.phase, same.action) == (Phase.RUNNING, Action.NONE)
    changed = decide(observe(spec=spec(V2), checkpoint=None, driver=driver))
    assert (changed.phase, changed.action, changed.reason) == (
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "ProgramChanged",
    )
    unknown = ObservedDriver(mode=DriverMode.RUN, generation=1, phase="Running")  # local run
    kept = decide(observe(spec=spec(V2), checkpoint=None, driver=unknown))
    assert kept.action is Action.NONE


def test_a_driver_started_before_spec_retry_existed_keeps_its_fingerprint() -> None:
    """The default `spec.retry` leaves the fingerprint what `spec.spark` alone gave, so an
    upgraded operator does not restart every running driver; any other retry changes it."""
    plain = spec(V1, spark={"driver": {"memory": "2Gi"}})
    assert plain.driver_fingerprint() == plain.spark.fingerprint()
    explicit = spec(V1, spark={"driver": {"memory": "2Gi"}}, retry=RetrySpec().model_dump())
    assert explicit.driver_fingerprint() == plain.spark.fingerprint()
    assert spec(V1, retry={"maxDelaySeconds": 5}).driver_fingerprint() != (
        spec(V1).driver_fingerprint()
    )


def test_retry_waits_double_from_the_initial_delay_up_to_the_longest() -> None:
    waits = RetrySpec.model_validate({"initialDelaySeconds": 2, "maxDelaySeconds": 60})
    assert [waits.delay(n) for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]
    assert [RetrySpec(initial_delay_seconds=0).delay(n) for n in (1, 5)] == [0, 0]
    with pytest.raises(ValueError, match="attempts"):
        RetrySpec.model_validate({"attempts": -1})
    with pytest.raises(ValueError, match="raise maxDelaySeconds too"):
        RetrySpec.model_validate({"initialDelaySeconds": 120})


def test_a_new_change_stops_a_driver_that_bootstrapped_the_previous_one() -> None:
    """After a bootstrap the driver keeps running the program it bootstrapped; a later program
    change must stop it and wait for its own approval, like any running driver."""
    v3 = V2.replace("2026-06-10", "2026-06-30")
    driver = ObservedDriver(
        mode=DriverMode.BOOTSTRAP, generation=2, phase="Running", change_id=CHANGE
    )
    decision = decide(
        observe(
            spec=spec(v3), generation=3, driver=driver, checkpoint=checkpoint(V2, bootstrap=CHANGE)
        )
    )
    assert (decision.phase, decision.action, decision.reason) == (
        Phase.STOPPING,
        Action.STOP_DRIVER,
        "ProgramChanged",
    )


def test_a_start_nobody_asked_for_is_shown_as_stopped_naming_the_command() -> None:
    """`spindle local status` after a run returned: nothing runs, nothing is starting."""
    decision = decide(observe(spec=spec(V1), start_requested=False, name="grades"))
    assert (decision.phase, decision.action, decision.reason) == (
        Phase.STOPPED,
        Action.NONE,
        "NotRunning",
    )
    assert "`spindle local run grades`" in decision.message
    approved = decide(observe(approval=CHANGE, start_requested=False, name="grades"))
    assert approved.phase is Phase.STOPPED and "bootstraps" in approved.message
    assert approved.pending_change is not None and approved.pending_change.id == CHANGE


def test_decision_names_the_driver_mode_it_starts() -> None:
    assert decide(observe(spec=spec(V1))).mode is DriverMode.RUN
    assert decide(observe(approval=CHANGE)).mode is DriverMode.BOOTSTRAP
    assert decide(observe()).mode is None and not decide(observe()).starts_driver


def test_an_unknown_pinned_runtime_is_an_invalid_spec() -> None:
    decision = decide(observe(spec=spec(V1, runtimeVersion="v9")))
    assert decision.phase is Phase.FAILED and decision.reason == "InvalidSpec"
    assert "spec.runtimeVersion" in decision.message and "'v9'" in decision.message


def test_asked_to_start_but_the_decision_starts_nothing_refuses_with_its_reason() -> None:
    with pytest.raises(SpindleError) as refused:
        decide_start(observe())
    assert refused.value.reason == "AwaitingApproval" and CHANGE in refused.value.message


def test_a_driver_pod_refuses_a_change_that_moved_after_approval() -> None:
    with pytest.raises(SpindleError) as moved:
        decide_start(observe(approval="0123456789ab"), bootstrap_of="0123456789ab")
    assert moved.value.reason == "ChangeMoved" and CHANGE in moved.value.message
    done = observe(spec=spec(V2), checkpoint=checkpoint(V2, bootstrap=CHANGE), approval=CHANGE)
    assert decide_start(done, bootstrap_of=CHANGE).mode is DriverMode.RUN


def test_a_driver_that_refused_a_moved_change_leaves_the_new_change_to_approve() -> None:
    """The pod says "Approve the pending change instead": the pipeline awaits that approval
    (it stayed Failed until a restartNonce), and bootstraps it once approved."""
    refused = ObservedDriver(
        mode=DriverMode.BOOTSTRAP,
        generation=2,
        phase="Failed",
        change_id="0123456789ab",
        reason="ChangeMoved",
        message="This driver was started to bootstrap change 0123456789ab, ...",
    )
    waiting = decide(observe(driver=refused, approval="0123456789ab"))
    assert (waiting.phase, waiting.reason) == (Phase.AWAITING_APPROVAL, "AwaitingApproval")
    approved = decide(observe(driver=refused, approval=CHANGE))
    assert (approved.phase, approved.action) == (Phase.BOOTSTRAPPING, Action.START_BOOTSTRAP)
    disagreeing = decide(observe(driver=replace(refused, change_id=CHANGE), approval=CHANGE))
    assert (disagreeing.phase, disagreeing.reason) == (Phase.FAILED, "ChangeMoved")


def test_a_restatement_asked_before_the_first_checkpoint_is_served_by_the_first_start() -> None:
    """The first start computes every view and records the request as served: it used to wait
    for that checkpoint, then ask to approve restating what the start had just computed."""
    request = "avg_grade@20261127T120000"
    first = decide(observe(spec=spec(V1), checkpoint=None, restate=request))
    assert (first.phase, first.action) == (Phase.PENDING, Action.START_RUN)
    assert first.plan is not None and first.plan.restate_request == request
    started = checkpoint(V1).model_copy(update={"restated": request})
    after = decide(observe(spec=spec(V1), checkpoint=started, restate=request))
    assert (after.action, after.pending_change) == (Action.START_RUN, None)


@pytest.mark.parametrize(
    "sql", ["", "  \n", "-- nothing yet\n", "create function f(x int) returns int as x;"]
)
def test_a_spec_without_tables_or_views_is_refused(sql: str) -> None:
    """An empty `spec.sql` (a templating or indentation slip) started a pipeline of nothing,
    and `spindle plan` said no approval was needed; over a checkpoint it asked to approve
    removing every table and view."""
    for stored in (None, checkpoint(V1)):
        decision = decide(observe(spec=spec(sql), checkpoint=stored))
        assert (decision.phase, decision.reason) == (Phase.FAILED, "InvalidSpec")
        assert decision.message.startswith("spec.sql declares no table and no view")
        assert decision.pending_change is None


def test_every_reason_spark_gives_a_view_is_one_the_sql_fixes() -> None:
    from spindle.runtime.maintain import SPARK_REASONS

    assert set(SPARK_REASONS.values()) <= SQL_FAILURES


def test_a_program_that_ran_with_a_name_spark_reads_as_another_runs_on_until_changed() -> None:
    """An upgrade that refuses such names stopped a healthy pipeline, and once renamed its
    checkpointed program no longer parsed (CheckpointProgramUnreadable): its state was lost."""
    shadowing = V1 + "\ncreate function upper(s varchar) returns varchar as s;\n"
    ran = checkpoint(shadowing)
    running = ObservedDriver(mode=DriverMode.RUN, generation=2, phase="Running", paused=False)
    unchanged = decide(observe(spec=spec(shadowing), checkpoint=ran, driver=running))
    assert (unchanged.phase, unchanged.action) == (Phase.RUNNING, Action.NONE)
    edited = shadowing.replace("as s;", "as lower(s);")
    refused = decide(observe(spec=spec(edited), checkpoint=ran))
    assert (refused.phase, refused.reason) == (Phase.FAILED, "DuplicateFunction")
    renamed = decide(observe(spec=spec(shadowing.replace("upper(", "shout(")), checkpoint=ran))
    assert renamed.phase is Phase.PENDING  # the checkpointed program still reads
