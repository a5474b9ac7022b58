"""`spindle driver`: the entrypoint of a Spark driver pod (the operator names it, with no shell).

Only the command line lives here; the driver pod's body is `spindle.runtime.pod`. On failure the
last line it prints is a JSON object `{"reason", "message"}`, which the operator reads from the
pod's termination message.
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

from spindle.errors import SpindleError

TERMINATION_LOG = "/dev/termination-log"


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
    from spindle.lifecycle import DriverMode
    from spindle.runtime.pod import PodSettings, run_driver_pod

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    settings = PodSettings(
        mode=DriverMode(args.mode),
        change_id=args.change_id,
        approved_by=args.approved_by,
        restate=args.restate,
        preview_request=args.preview_request,
        master=args.master,
        conf=_conf(args.conf),
        until_idle=args.until_idle,
        interval=args.interval,
    )
    return run_driver_pod(settings, stop=stop)


def report_failure(error: SpindleError) -> None:
    """The last line of output, and the termination message when the path is writable."""
    line = json.dumps({"reason": error.reason, "message": error.message})
    print(line, file=sys.stderr, flush=True)
    path = Path(os.environ.get("SPINDLE_TERMINATION_LOG", TERMINATION_LOG))
    with contextlib.suppress(OSError):  # else FallbackToLogsOnError takes the last log line
        path.write_text(line)


def register(sub: Any) -> None:
    driver = sub.add_parser("driver", help="run as a Spark driver pod (started by the operator)")
    driver.add_argument("--mode", choices=("run", "bootstrap", "preview"), required=True)
    driver.add_argument("--change-id", help="the approved change (bootstrap mode)")
    driver.add_argument("--approved-by", default=None, help="recorded in the checkpoint")
    driver.add_argument(
        "--restate", default=None, help="the restatement request the approved change serves"
    )
    driver.add_argument(
        "--preview-request", default=None, help="the spindle.dev/preview request (preview mode)"
    )
    driver.add_argument("--master", default="local[2]", help="Spark master")
    driver.add_argument("--conf", action="append", default=[], help="Spark setting key=value")
    driver.add_argument("--until-idle", action="store_true", help="exit once input runs dry")
    driver.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    driver.set_defaults(run=cmd_driver, on_error=report_failure)
