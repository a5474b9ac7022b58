"""`spindle operator`: serve the Kubernetes operator (kopf) for some namespaces or all of them."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import uuid
from typing import Any

from pydantic import ValidationError

from spindle.api import StorageSpec
from spindle.errors import SpindleError

NAMED = {"credentials": ("secret", "secretName")}
"""A `StorageSpec` field's flag and chart value, where they are named otherwise."""


def _default_storage(args: argparse.Namespace) -> StorageSpec | None:
    if not args.default_storage_uri:
        return None
    credentials = None
    if args.default_storage_secret:
        secret = args.default_storage_secret
        credentials = {
            "accessKeyId": {"name": secret, "key": "accessKeyId"},
            "secretAccessKey": {"name": secret, "key": "secretAccessKey"},
        }
    try:
        return StorageSpec.model_validate(
            {
                "uri": args.default_storage_uri,
                "endpoint": args.default_storage_endpoint,
                "region": args.default_storage_region,
                "credentials": credentials,
            }
        )
    except ValidationError as error:  # the chart's defaultStorage values: the operator exits
        problem = error.errors()[0]
        field = str(problem["loc"][0]) if problem["loc"] else "uri"
        flag, value = NAMED.get(field, (field, field))
        hint = "; an endpoint is a URL (http://host:port)" if field == "endpoint" else ""
        raise SpindleError(
            reason="InvalidArguments",
            message=f"--default-storage-{flag}: {problem['msg']} (chart value "
            f"defaultStorage.{value}){hint}.",
        ) from None


def _election(args: argparse.Namespace) -> Any:
    """The Lease to campaign for, or None (one replica, no election)."""
    if not args.leader_election:
        return None
    from spindle.k8s.election import Timing
    from spindle.k8s.operator import Election

    namespace = args.lease_namespace or os.environ.get("POD_NAMESPACE")
    if not namespace:
        raise SpindleError(
            reason="InvalidArguments",
            message="--leader-election needs --lease-namespace (or POD_NAMESPACE).",
        )
    pod = os.environ.get("POD_NAME") or socket.gethostname()
    try:
        timing = Timing(
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
        )
    except ValueError as error:
        raise SpindleError(reason="InvalidArguments", message=str(error)) from None
    return Election(
        identity=f"{pod}_{uuid.uuid4().hex[:8]}",  # a restarted process is a new candidate
        lease_name=args.lease_name,
        lease_namespace=namespace,
        timing=timing,
    )


def cmd_operator(args: argparse.Namespace) -> int:
    if bool(args.namespace) == bool(args.all_namespaces):
        raise SpindleError(
            reason="InvalidArguments",
            message="Name the namespaces to watch (--namespace NS, repeatable), or pass "
            "--all-namespaces.",
        )
    from spindle.k8s.operator import Operator, run
    from spindle.k8s.pods import DriverSettings
    from spindle.k8s.reconcile import Settings

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:  # kopf's line per handled watch event: one per status write, per pipeline
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    operator = Operator(
        settings=Settings(
            driver=DriverSettings(
                image=args.driver_image,
                service_account=args.driver_service_account,
                local_threads=args.driver_threads,
                termination_grace_seconds=args.stop_grace,
            ),
            default_storage=_default_storage(args),
        ),
        namespaces=None if args.all_namespaces else list(args.namespace),
        resync=args.resync,
        recheck=args.recheck,
        workers=args.workers,
        port=args.port,
        stall_after=args.stall_after,
        election=_election(args),
    )
    run(operator)
    return 0


def register(sub: Any) -> None:
    op = sub.add_parser("operator", help="run the Kubernetes operator")
    op.add_argument("--namespace", "-n", action="append", default=[], help="watch this namespace")
    op.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace")
    op.add_argument(
        "--driver-image",
        default="ghcr.io/spindle-dev/spindle-spark:0.1.0",
        help="default image of Spark driver pods",
    )
    op.add_argument("--driver-service-account", default="spindle-driver")
    op.add_argument("--driver-threads", type=int, default=2, help="local[N] in spark.mode local")
    op.add_argument("--default-storage-uri", help="storage of pipelines without spec.storage")
    op.add_argument("--default-storage-endpoint")
    op.add_argument("--default-storage-region")
    op.add_argument(
        "--default-storage-secret",
        help="Secret (in each pipeline's namespace) with keys accessKeyId and secretAccessKey",
    )
    op.add_argument("--resync", type=float, default=10.0, help="seconds between re-lists")
    op.add_argument(
        "--recheck",
        type=float,
        default=300.0,
        help="seconds a quiet pipeline (unchanged, no driver) goes between reconciles",
    )
    op.add_argument("--workers", type=int, default=8, help="concurrent reconciles")
    op.add_argument("--port", type=int, default=8080, help="/healthz and /metrics")
    op.add_argument("--stall-after", type=float, default=60.0, help="liveness: watch stall")
    op.add_argument("--stop-grace", type=int, default=120, help="seconds a driver gets to stop")
    op.add_argument(
        "--leader-election",
        action="store_true",
        help="reconcile only while holding a coordination.k8s.io Lease (for 2+ replicas)",
    )
    op.add_argument("--lease-name", default="spindle-operator", help="the Lease's name")
    op.add_argument("--lease-namespace", help="the Lease's namespace (default: POD_NAMESPACE)")
    op.add_argument("--lease-duration", type=float, default=15.0, help="seconds a lease lasts")
    op.add_argument(
        "--renew-deadline", type=float, default=10.0, help="a leader that cannot renew stops"
    )
    op.add_argument("--retry-period", type=float, default=2.0, help="seconds between attempts")
    op.add_argument("--verbose", "-v", action="store_true")
    op.set_defaults(run=cmd_operator)
