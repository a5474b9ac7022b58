"""A real S3-compatible server on loopback: versitygw (posix backend), built from its Go module.

versitygw implements conditional writes (`If-None-Match: *`, `If-Match: <etag>`) the way AWS S3
does; `tests/harness/test_harness.py` proves it on every run, so a regression in the server is
caught rather than trusted.
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any

from tests.harness import binaries, cache, processes

ACCESS_KEY = "spindle-test-access"
SECRET_KEY = "spindle-test-secret-key"
REGION = "us-east-1"


@dataclass
class S3Server:
    workdir: Path
    endpoint: str = ""
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION
    _process: Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> S3Server:
        binary = binaries.ensure("versitygw")
        data, sidecar = self.workdir / "data", self.workdir / "meta"
        data.mkdir(parents=True, exist_ok=True)
        sidecar.mkdir(parents=True, exist_ok=True)
        port = processes.free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        log = self.workdir / "versitygw.log"
        with cache.timed("S3 server start", "started"):
            self._process = processes.start(
                [
                    str(binary),
                    "--access",
                    self.access_key,
                    "--secret",
                    self.secret_key,
                    "--region",
                    self.region,
                    "--port",
                    f"127.0.0.1:{port}",
                    "--quiet",
                    "--keep-alive",  # as AWS S3 does: a connection serves many requests
                    "posix",
                    "--sidecar",
                    str(sidecar),
                    str(data),
                ],
                log=log,
            )
            processes.wait_until(
                lambda: self.client().list_buckets() is not None,
                timeout=30,
                what="versitygw",
                process=self._process,
                log=log,
            )
        return self

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    @property
    def pid(self) -> int:
        assert self._process is not None, "the S3 server is not running"
        return self._process.pid

    def bucket(self, prefix: str = "spindle") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name

    def env(self) -> dict[str, str]:
        """The environment a Spindle process uses to reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "SPINDLE_S3_ENDPOINT": self.endpoint,
        }

    def stop(self) -> None:
        if self._process is not None:
            processes.stop(self._process)
            self._process = None

    def reachable_at(self, host: str, *, registry: Path | None = None) -> S3Server:
        """The same server, also reachable on `host` (an address of this machine that the test
        cluster's pods can reach), through a TCP relay (socat) started here."""
        port = processes.free_port()
        target = self.endpoint.removeprefix("http://")
        relay = S3Server(
            self.workdir,
            endpoint=f"http://{host}:{port}",
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
        )
        relay._process = processes.start(
            ["socat", f"TCP-LISTEN:{port},bind={host},fork,reuseaddr", f"TCP:{target}"],
            log=self.workdir / f"relay-{port}.log",
            registry=registry,
        )
        processes.wait_until(
            lambda: relay.client().list_buckets() is not None,
            timeout=30,
            what="the S3 relay",
            process=relay._process,
        )
        return relay


def start(workdir: Path | None = None) -> S3Server:
    return S3Server(workdir or Path(tempfile.mkdtemp(prefix="spindle-s3-"))).start()
