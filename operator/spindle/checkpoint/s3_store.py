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

_CREDENTIALS_HINT = (
    "Name a Secret in spec.storage.credentials (or, for the CLI and local runs, set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and AWS_SESSION_TOKEN for temporary ones)."
)
_THROTTLING = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded"}
_DELETE_RETRIED = {"InternalError", "ServiceUnavailable", "SlowDown", *_THROTTLING}
"""Codes of keys a DeleteObjects answer lists as not deleted that a retry may delete."""
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
            message=f"No S3 credentials were found. {_CREDENTIALS_HINT}",
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
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.session.Session(
            aws_access_key_id=options.access_key,
            aws_secret_access_key=options.secret_key,
            aws_session_token=options.session_token,
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
    except (BotoCoreError, ValueError) as error:  # a region or endpoint boto3 cannot use
        raise SpindleError(
            reason="InvalidStorageOptions",
            message=f"The storage options cannot be used: {error}. Fix spec.storage.region and "
            "spec.storage.endpoint (locally: AWS_REGION and SPINDLE_S3_ENDPOINT).",
            details={"region": options.region, "endpoint": options.endpoint},
        ) from None
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
            NoCredentialsError,
            ParamValidationError,
        )

        def attempt() -> Any:
            try:
                return fn()
            except ClientError as error:
                status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
                code = str(error.response.get("Error", {}).get("Code", ""))
                raise self._refusal(status, code, key) from None
            except NoCredentialsError:
                raise SpindleError(
                    reason="StorageRequestRejected",
                    message=f"No S3 credentials were found for {self.uri}. {_CREDENTIALS_HINT}",
                ) from None
            except ParamValidationError as error:  # a request boto3 will not make
                raise SpindleError(
                    reason="StorageRequestRejected",
                    message=f"A request for {self.uri}/{key} could not be made: {error}. "
                    "Check spec.storage.",
                ) from None
            except BotoCoreError as error:  # the connection's: refused, closed, timed out
                raise retry.Transient(type(error).__name__ + ": " + str(error)) from None

        return retry.call(attempt, uri=f"{self.uri}/{key}", policy=self.policy)

    def _refusal(self, status: int, code: str, key: str) -> Exception:
        """What an S3 error answer means to the store: the same for boto3's calls and reads."""
        if status == 412 or code == "PreconditionFailed":
            return PreconditionFailed(key)
        if status == 304:
            return NotModified(key)
        if code == "NoSuchBucket":
            return SpindleError(
                reason="StorageBucketNotFound",
                message=f"Bucket {self.bucket!r} does not exist at "
                f"{self.options.endpoint or 'the default S3 endpoint'}. Create it, or fix "
                "spec.storage.uri and spec.storage.endpoint.",
                details={"uri": f"{self.uri}/{key}", "status": status, "code": code},
            )
        if status == 404 or code in ("NoSuchKey", "404", "NotFound"):
            return ObjectNotFound(key)
        if (
            (status >= 500 and status != 501)
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

        try:
            written: str = self._call(put, key)
        except SpindleError as error:
            if extra and error.details.get("status") == 501:  # the header, not the request
                raise SpindleError(
                    reason="ConditionalWritesUnsupported",
                    message=f"The store at {self.uri} does not implement conditional writes "
                    f"(it answered {', '.join(extra)} with 501 {error.details.get('code')}), "
                    "so checkpoints could be silently overwritten. Use an S3 service with "
                    "conditional writes (AWS S3, MinIO, versitygw, ...).",
                    details={"uri": self.uri},
                ) from None
            raise
        except ObjectNotFound:  # a write if the object has an ETag, to one that is gone
            if if_match is None:
                raise
            raise PreconditionFailed(key) from None
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
        """Delete the keys, 1,000 a request. A quiet DeleteObjects answers 200 and lists the
        keys it could not delete: a throttled or failed key is retried with the batch, and
        one refused (AccessDenied) is an error, never a silent success."""
        for start in range(0, len(keys), 1000):
            batch = [{"Key": self._key(k)} for k in keys[start : start + 1000]]

            def delete_batch(batch: list[dict[str, str]] = batch) -> None:
                answer = self.s3.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
                failed = answer.get("Errors") or []
                if not failed:
                    return
                first = failed[0]
                code, failed_key = str(first.get("Code", "")), str(first.get("Key", ""))
                if all(str(e.get("Code", "")) in _DELETE_RETRIED for e in failed):
                    raise retry.Transient(f"{code} deleting {failed_key}")
                raise SpindleError(
                    reason="StorageRequestRejected",
                    message=f"Object storage refused to delete {len(failed)} of {len(batch)} "
                    f"objects under {self.uri} (the first: {failed_key}, {code}: "
                    f"{first.get('Message', '')}). Grant the credentials s3:DeleteObject on it.",
                    details={"uri": self.uri, "code": code, "failed": len(failed)},
                )

            self._call(delete_batch, "(delete)")

    def child(self, key: str) -> S3Store:
        return S3Store(self.bucket, self._key(key).rstrip("/"), self.options, self.policy, self._s3)
