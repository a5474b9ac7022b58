"""`spindle plan -f pipeline.yaml [--checkpoint URI[#ID]]`: the change id, offline.

It reads the checkpoint the operator would plan against (and its stored relations' sizes, for the
estimate) and runs the same lifecycle, so the id it prints is the one the operator will ask for,
a `spindle.dev/restate` annotation in the manifest included: commit `spindle.dev/approve: <id>`
with the SQL change and the bootstrap runs on sync (GitOps approval).
"""

from __future__ import annotations

import argparse
from typing import Any

from spindle.api import DesiredState, Phase, PipelineManifest
from spindle.api.types import APPROVE_ANNOTATION, RESTATE_ANNOTATION, request_annotation
from spindle.checkpoint import Manifest, PipelineRef
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.origin import starting_checkpoint
from spindle.checkpoint.statistics import needs_sizes, stored_sizes
from spindle.checkpoint.store import open_store, pipeline_root
from spindle.cli import render
from spindle.cli.local import read_manifest_at
from spindle.cli.sql_origin import in_file
from spindle.errors import SpindleError
from spindle.lifecycle import Observation, decide
from spindle.lifecycle.rules import pending_change
from spindle.program import Program, parse_program
from spindle.versions import RUNTIME_VERSION


def cmd_plan(args: argparse.Namespace) -> int:
    manifest, origin = read_manifest_at(args.file)
    try:
        return _plan(args, manifest)
    except SpindleError as error:  # a program's problem: where it is in the file too
        raise in_file(error, origin) from None


def _plan(args: argparse.Namespace, manifest: PipelineManifest) -> int:
    spec, meta = manifest.spec, manifest.metadata
    storage = spec.storage
    uri = args.checkpoint
    if uri is None:
        if storage is None:  # no checkpoint to plan against: the program's problems first
            parse_program(spec.sql).refuse_unrunnable()
            raise SpindleError(
                reason="StorageNotConfigured",
                message="The manifest has no spec.storage; pass --checkpoint URI (the "
                "pipeline's root: <storage uri>/<namespace>/<name>).",
            )
        uri = pipeline_root(storage.uri, namespace=meta.namespace, name=meta.name)
    s3 = S3Options.from_env().located(
        endpoint=storage.endpoint if storage else None, region=storage.region if storage else None
    )
    root, _, checkpoint_id = uri.partition("#")
    store = open_store(root, s3=s3)
    checkpoint: Manifest | None
    if checkpoint_id:
        checkpoint = store.get(checkpoint_id)
    else:
        checkpoint = starting_checkpoint(
            store,
            start_from=storage.start_from if storage else None,
            pipeline=PipelineRef(namespace=meta.namespace, name=meta.name),
            s3=s3,
            adopt=False,
        )
    restate = meta.annotations.get(RESTATE_ANNOTATION)
    approval = request_annotation(meta.annotations, APPROVE_ANNOTATION)  # as the operator does
    runtime = spec.runtime_version or RUNTIME_VERSION
    sizes = (
        stored_sizes(store.objects, checkpoint, s3=s3)
        if checkpoint is not None
        and needs_sizes(checkpoint, sql=spec.sql, runtime=runtime, restate=restate)
        else None
    )
    observed = Observation(
        spec=spec,
        generation=0,
        checkpoint=checkpoint,
        restate=restate,
        approval=approval,
        sizes=sizes,
    )
    decision = decide(observed)
    if decision.phase is Phase.FAILED:  # never "no change": every problem of the program, as
        # `spindle diff` lists them (the lifecycle names the first), else the decision's reason
        parse_program(spec.sql).refuse_unrunnable(references=not observed.spark_ran)
        raise decision.refusal()
    pending = decision.pending_change
    plan = decision.plan
    if pending is None and plan is not None and plan.needs_approval:
        pending = pending_change(plan)  # a change desiredState: Stopped keeps from running
    warnings = plan.new.warnings if plan else _warnings(decision.program)
    body: dict[str, Any] = {
        "changeId": pending.id if pending else None,
        "checkpoint": checkpoint.id if checkpoint else None,
        "checkpointRoot": root,
        "needsApproval": decision.phase is Phase.AWAITING_APPROVAL,
        "pendingChange": pending.model_dump(mode="json") if pending else None,
        "reason": decision.reason,
        "warnings": list(warnings),
    }
    if args.json:
        render.print_json(body)
        return 0
    out = render.console()
    if pending is None:
        if checkpoint is None:
            said = (
                f"there is no checkpoint at {root}, so the pipeline starts from scratch. If it "
                "has run before, that is not its root (the root is <storage uri>/<namespace>/"
                "<name>, as spindle checkpoints list shows)."
            )
        else:
            said = f"the program matches checkpoint {checkpoint.id}."
        out.print(f"No approval needed: {said}", markup=False)
        for warning in warnings:
            out.print(f"warning: {warning}", markup=False)
        return 0
    assert plan is not None
    render.print_plan(plan, out, policy=spec.bootstrap_policy)
    if decision.pending_change is None and spec.desired_state is DesiredState.STOPPED:
        out.print(
            f"The pipeline is stopped (spec.desiredState: Stopped): change {pending.id} does "
            "not bootstrap, and nothing runs, until desiredState is Running.",
            markup=False,
        )
    elif decision.phase is Phase.AWAITING_APPROVAL:
        if approval is not None:
            out.print(
                f'The manifest\'s {APPROVE_ANNOTATION}: "{approval}" names another change: '
                "the operator ignores it.",
                markup=False,
            )
        out.print(f'Commit the annotation with the change:  {APPROVE_ANNOTATION}: "{pending.id}"')
    elif decision.phase is Phase.BOOTSTRAPPING and approval == pending.id:
        out.print(
            f"Approved: the manifest's {APPROVE_ANNOTATION} names change {pending.id}, so the "
            "operator bootstraps it when the manifest is applied.",
            markup=False,
        )
    return 0


def _warnings(program: Program | None) -> tuple[str, ...]:
    return program.warnings if program is not None else ()


def register(sub: Any) -> None:
    plan = sub.add_parser("plan", help="the change id a manifest needs, against its checkpoint")
    plan.add_argument("-f", "--file", required=True, help="Pipeline manifest (YAML/JSON, - stdin)")
    plan.add_argument(
        "--checkpoint", help="pipeline root URI[#checkpoint id] (default: from spec.storage)"
    )
    plan.add_argument("--json", action="store_true", help="print one JSON object")
    plan.set_defaults(run=cmd_plan)
