"""The S3 backend: boto3 with conditional writes, signed GETs for reads (`s3_reads`), and
Spindle's own retry policy.

boto3's retries are off so that `RetryPolicy` alone decides: 5xx, throttling, timeouts and
dropped connections are retried with jittered backoff until the deadline; a 412 is an answer.
One boto3 client serves every store of a process with the same options and timeouts (a client
costs tens of milliseconds to build and about a megabyte to keep; the operator holds a store per
pipeline), and boto3 clients are safe to share between threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from spindle.checkpoint import retry, s3_reads
from spindle.checkpoint.blobs import (
    Blob,
    Listed,
    NotModified,
    ObjectNotFound,
    PreconditionFailed,
    S3Options,
)
from spindle.errors import SpindleError

_THROTTLING = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded"}
_CLIENTS: dict[tuple[S3Options, float, float], tuple[Any, s3_reads.Reader | None]] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(options: S3Options, policy: retry.RetryPolicy) -> Any:
    """The process's client for these options and timeouts, built on first use."""
    return _connection(options, policy)[0]


def _reader(options: S3Options, policy: retry.RetryPolicy) -> s3_reads.Reader:
    """The reader (`s3_reads`) that goes with the client for these options and timeouts."""
    found = _connection(options, policy)[1]
    if found is None:
        raise SpindleError(
            reason="StorageRequestRejected",
            message="No S3 credentials were found. Name a Secret in spec.storage.credentials "
            "(or, for the CLI and local runs, set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).",
        )
    return found


def _connection(
    options: S3Options, policy: retry.RetryPolicy
) -> tuple[Any, s3_reads.Reader | None]:
    key = (options, policy.connect_timeout, policy.read_timeout)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = _new_connection(options, policy)
        return _CLIENTS[key]


def _new_connection(
    options: S3Options, policy: retry.RetryPolicy
) -> tuple[Any, s3_reads.Reader | None]:
    """A boto3 client, and a reader with the client's endpoint, region and credentials (None
    when the credentials chain found none: boto3 itself then refuses every request)."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=options.access_key,
        aws_secret_access_key=options.secret_key,
        region_name=options.region or "us-east-1",
    )
    client = session.client(
        "s3",
        endpoint_url=options.endpoint,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=policy.connect_timeout,
            read_timeout=policy.read_timeout,
            max_pool_connections=32,
        ),
    )
    credentials = session.get_credentials()
    reader = None
    if credentials is not None:
        reader = s3_reads.Reader(
            endpoint=client.meta.endpoint_url,
            region=client.meta.region_name,
            credentials=credentials,
            connect_timeout=policy.connect_timeout,
            read_timeout=policy.read_timeout,
        )
    return client, reader


@dataclass
class S3Store:
    bucket: str
    prefix: str
    options: S3Options
    policy: retry.RetryPolicy
    _s3: Any = field(default=None, repr=False)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = _client(self.options, self.policy)
        return self._s3

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}".lstrip("/") if self.prefix else key

    def _call(self, fn: Any, key: str) -> Any:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
        )
        from botocore.exceptions import (
            ConnectionError as BotoConnectionError,
        )

        def attempt() -> Any:
            try:
                return fn()
            except ClientError as error:
                status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
                code = str(error.response.get("Error", {}).get("Code", ""))
                raise self._refusal(status, code, key) from None
            except (BotoConnectionError, BotoCoreError) as error:
                raise retry.Transient(type(error).__name__ + ": " + str(error)) from None

        return retry.call(attempt, uri=f"{self.uri}/{key}", policy=self.policy)

    def _refusal(self, status: int, code: str, key: str) -> Exception:
        """What an S3 error answer means to the store: the same for boto3's calls and reads."""
        if status == 412 or code == "PreconditionFailed":
            return PreconditionFailed(key)
        if status == 304:
            return NotModified(key)
        if status == 404 or code in ("NoSuchKey", "404", "NotFound"):
            return ObjectNotFound(key)
        if (
            status >= 500
            or status == 429
            or code in _THROTTLING
            or (status == 409 and code == "ConditionalRequestConflict")
        ):
            return retry.Transient(f"{status} {code}")
        return SpindleError(
            reason="StorageRequestRejected",
            message=f"Object storage rejected a request for {self.uri}/{key}: {status} "
            f"{code}. Check the bucket, the credentials Secret and their permissions.",
            details={"uri": f"{self.uri}/{key}", "status": status, "code": code},
        )

    def read(self, key: str, *, if_none_match: str | None = None) -> Blob:
        """A signed GET (`s3_reads`): most reads are a pointer answered 304."""
        get = _reader(self.options, self.policy).get

        def fetch() -> Blob:
            try:
                answer = get(self.bucket, self._key(key), if_none_match=if_none_match)
            except s3_reads.ShortRead as error:
                raise retry.Transient(f"ShortRead: {error}") from None
            if answer.status != 200:
                raise self._refusal(answer.status, answer.code, key)
            return Blob(answer.body, answer.etag)

        result: Blob = self._call(fetch, key)  # botocore's transport errors: transient
        return result

    def write(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        extra: dict[str, str] = {}
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match

        def put() -> str:
            response = self.s3.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=data, **extra
            )
            return str(response["ETag"])

        written: str = self._call(put, key)
        return written

    def scan(self, prefix: str) -> list[Listed]:
        def page_through() -> list[Listed]:
            found: list[Listed] = []
            paginator = self.s3.get_paginator("list_objects_v2")
            start = self._key(prefix)
            for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
                for item in page.get("Contents", []):
                    relative = (
                        item["Key"][len(self.prefix) :].lstrip("/") if self.prefix else item["Key"]
                    )
                    found.append(Listed(relative, item["LastModified"]))
            return found

        listed: list[Listed] = self._call(page_through, prefix)
        return listed

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = [{"Key": self._key(k)} for k in keys[start : start + 1000]]
            self._call(
                lambda batch=batch: self.s3.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                ),
                "(delete)",
            )

    def child(self, key: str) -> S3Store:
        return S3Store(self.bucket, self._key(key).rstrip("/"), self.options, self.policy, self._s3)
