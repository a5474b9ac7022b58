"""`spindle driver`: the entrypoint of a Spark driver pod (the operator names it, with no shell).

The pod carries everything it needs: the pipeline (`SPINDLE_PIPELINE`, JSON: namespace, name,
generation, spec), the mode and the approved change id as arguments, S3 credentials from a
Secret through `secretKeyRef`, and Spark settings as `--conf` arguments. The driver plans again
from the checkpoint it finds and refuses to bootstrap anything but the approved change id, so a
change that moved after approval is never bootstrapped. On failure the last line it prints is a
JSON object `{"reason", "message"}`, which the operator reads from the pod's termination message.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from spindle.api import PipelineSpec
from spindle.checkpoint import PipelineRef
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.origin import starting_checkpoint
from spindle.checkpoint.store import open_store
from spindle.errors import SpindleError
from spindle.lifecycle import Action, Observation, decide

TERMINATION_LOG = "/dev/termination-log"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _pipeline() -> tuple[PipelineRef, int, PipelineSpec]:
    raw = os.environ.get("SPINDLE_PIPELINE")
    if not raw:
        raise SpindleError(
            reason="DriverMisconfigured",
            message="SPINDLE_PIPELINE is not set; driver pods are created by the operator.",
        )
    body: dict[str, Any] = json.loads(raw)
    ref = PipelineRef(namespace=body["namespace"], name=body["name"])
    return ref, int(body["generation"]), PipelineSpec.model_validate(body["spec"])


def _conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SpindleError(
                reason="DriverMisconfigured", message=f"--conf {pair!r} is not key=value."
            )
        conf[key] = value
    return conf


def cmd_driver(args: argparse.Namespace) -> int:
    ref, generation, spec = _pipeline()
    if spec.storage is None:
        raise SpindleError(reason="StorageNotConfigured", message="The pipeline has no storage.")
    s3 = S3Options.from_env()
    store = open_store(spec.storage.uri, namespace=ref.namespace, name=ref.name, s3=s3)
    checkpoint = starting_checkpoint(
        store, start_from=spec.storage.start_from, pipeline=ref, s3=s3, adopt=True
    )
    decision = decide(
        Observation(
            spec=spec, generation=generation, checkpoint=checkpoint, approval=args.change_id
        )
    )
    if args.mode == "bootstrap" and decision.action is not Action.START_BOOTSTRAP:
        done = checkpoint is not None and checkpoint.bootstrap is not None
        if not (done and checkpoint.bootstrap.change_id == args.change_id):  # type: ignore[union-attr]
            raise SpindleError(
                reason="ChangeMoved",
                message=f"This driver was started to bootstrap change {args.change_id}, but the "
                f"checkpoint and program now give change {decision.change_id}; nothing was "
                "done. Approve the pending change instead.",
            )
        _say(f"Change {args.change_id} is already bootstrapped; running.")
    if decision.action not in (Action.START_RUN, Action.START_BOOTSTRAP):
        reason = decision.reason or decision.phase.value
        message = decision.conditions[0].message if decision.conditions else reason
        raise SpindleError(reason=reason, message=message)

    from spindle.runtime.driver import drive, reporter
    from spindle.runtime.engine import Runtime
    from spindle.runtime.session import spark_session

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    conf = {**spec.spark.conf, **_conf(args.conf)}
    spark = spark_session(
        app=f"spindle-{ref.namespace}-{ref.name}", s3=s3, master=args.master, extra=conf
    )
    runtime = Runtime(
        spark=spark,
        store=store,
        root=store.uri,
        pipeline=ref,
        report=reporter(_say),
        outputs_on_bootstrap=spec.outputs.on_bootstrap,
    )
    drive(
        runtime,
        decision=decision,
        checkpoint=checkpoint,
        stop=stop,
        until_idle=args.until_idle,
        paused=lambda: spec.desired_state.value == "Paused",
        say=_say,
        approved_by=args.approved_by,
        interval=args.interval,
    )
    return 0


def report_failure(error: SpindleError) -> None:
    """The last line of output, and the termination message when the path is writable."""
    line = json.dumps({"reason": error.reason, "message": error.message})
    print(line, file=sys.stderr, flush=True)
    path = Path(os.environ.get("SPINDLE_TERMINATION_LOG", TERMINATION_LOG))
    with contextlib.suppress(OSError):  # else FallbackToLogsOnError takes the last log line
        path.write_text(line)


def register(sub: Any) -> None:
    driver = sub.add_parser("driver", help="run as a Spark driver pod (started by the operator)")
    driver.add_argument("--mode", choices=("run", "bootstrap"), required=True)
    driver.add_argument("--change-id", help="the approved change (bootstrap mode)")
    driver.add_argument("--approved-by", default=None, help="recorded in the checkpoint")
    driver.add_argument("--master", default="local[2]", help="Spark master")
    driver.add_argument("--conf", action="append", default=[], help="Spark setting key=value")
    driver.add_argument("--until-idle", action="store_true", help="exit once input runs dry")
    driver.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    driver.set_defaults(run=cmd_driver, on_error=report_failure)
