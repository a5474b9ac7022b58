"""The S3 backend's answers where the S3 server used everywhere else never gives them: a
missing bucket, keys a DeleteObjects could not delete, a 501 to a conditional header, a 304
with the object's length, no credentials, a region boto3 cannot use. boto3's own stub plays S3
(botocore.stub.Stubber: no request leaves the process); the rest of the backend runs against
the real server (tests/integration/test_checkpoints.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber

from spindle.checkpoint import s3_store
from spindle.checkpoint.blobs import NotModified, S3Options
from spindle.checkpoint.retry import RetryPolicy
from spindle.checkpoint.s3_store import S3Store
from spindle.checkpoint.store import CheckpointStore
from spindle.errors import SpindleError

ENDPOINT = "http://127.0.0.1:9"  # never reached: the stub answers
POLICY = RetryPolicy(deadline=2.0, first_delay=0.01, max_delay=0.02)


@pytest.fixture(autouse=True)
def no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def store(**options: Any) -> S3Store:
    given = {"endpoint": ENDPOINT, "access_key": "k", "secret_key": "s", **options}
    return S3Store("bucket", "ns/p", S3Options(**given), POLICY)


@pytest.fixture
def stubbed() -> Iterator[tuple[S3Store, Stubber]]:
    found = store()
    with Stubber(found.s3) as stub:
        yield found, stub


def reason(call: Any) -> str:
    with pytest.raises(SpindleError) as raised:
        call()
    return raised.value.reason


def test_a_missing_bucket_is_named_not_read_as_no_checkpoint(
    stubbed: tuple[S3Store, Stubber],
) -> None:
    """A 404 NoSuchBucket on a read was a missing key: the operator saw no checkpoint and
    started the pipeline afresh, without a word about the bucket."""
    found, stub = stubbed
    stub.add_client_error("put_object", service_error_code="NoSuchBucket", http_status_code=404)
    assert reason(lambda: found.write("latest", b"x")) == "StorageBucketNotFound"
    stub.add_client_error(
        "list_objects_v2", service_error_code="NoSuchBucket", http_status_code=404
    )
    assert reason(lambda: found.scan("")) == "StorageBucketNotFound"
    answer = b"<Error><Code>NoSuchBucket</Code></Error>"
    reader = s3_store._reader(found.options, found.policy)
    kept = reader._session
    reader._session = Session(Answered(404, {}, answer))  # type: ignore[assignment]
    try:
        assert reason(lambda: CheckpointStore(found).latest()) == "StorageBucketNotFound"
    finally:
        reader._session = kept


def test_keys_a_delete_could_not_delete_are_retried_or_refused(
    stubbed: tuple[S3Store, Stubber],
) -> None:
    """A quiet DeleteObjects answers 200 and lists the keys it did not delete: retention said
    it deleted them, and storage grew without bound."""
    found, stub = stubbed
    slow = {"Key": "ns/p/a", "Code": "SlowDown", "Message": "Reduce your request rate"}
    stub.add_response("delete_objects", {"Errors": [slow]})
    stub.add_response("delete_objects", {})
    found.delete(["a"])  # retried, then deleted
    stub.assert_no_pending_responses()
    denied = {"Key": "ns/p/a", "Code": "AccessDenied", "Message": "Access Denied"}
    stub.add_response("delete_objects", {"Errors": [denied]})
    with pytest.raises(SpindleError) as raised:
        found.delete(["a", "b"])
    assert raised.value.reason == "StorageRequestRejected"
    assert "refused to delete 1 of 2 objects" in raised.value.message
    assert "s3:DeleteObject" in raised.value.message


def test_a_501_to_a_conditional_write_says_conditional_writes_are_unsupported(
    stubbed: tuple[S3Store, Stubber],
) -> None:
    """It was retried as a server error until the deadline, then StorageUnavailable."""
    found, stub = stubbed
    stub.add_client_error("put_object", service_error_code="NotImplemented", http_status_code=501)
    assert reason(lambda: found.write("p", b"1", if_none_match=True)) == (
        "ConditionalWritesUnsupported"
    )
    stub.assert_no_pending_responses()  # one request: not retried


def test_no_credentials_is_refused_at_once_not_retried_as_unavailable() -> None:
    found = store(access_key=None, secret_key=None)
    with pytest.raises(SpindleError) as raised:
        found.write("latest", b"x")
    assert raised.value.reason == "StorageRequestRejected"
    assert "AWS_ACCESS_KEY_ID" in raised.value.message


def test_a_region_boto3_cannot_use_is_a_reason_not_a_crash() -> None:
    """A raw InvalidRegionError escaped every reconcile: retried forever, no status."""
    found = store(region="eu west 1")
    with pytest.raises(SpindleError) as raised:
        found.read("latest")
    assert raised.value.reason == "InvalidStorageOptions"
    assert "spec.storage.region" in raised.value.message


def test_temporary_credentials_sign_with_their_session_token() -> None:
    options = S3Options.from_env(
        {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t"}
    )
    found = S3Store("bucket", "ns/p", options.located(endpoint=ENDPOINT, region=None), POLICY)
    reader = s3_store._reader(found.options, found.policy)
    session = Session(Answered(200, {"ETag": '"e"', "Content-Length": "2"}, b"{}"))
    reader._session = session  # type: ignore[assignment]
    assert found.read("latest").data == b"{}"
    assert session.seen[0].headers["X-Amz-Security-Token"] == "t"
    assert found.s3._request_signer._credentials.token == "t"


def test_a_304_that_carries_the_objects_length_is_not_a_short_read() -> None:
    """RFC 9110 lets a 304 carry the representation's Content-Length with no body: every
    conditional read of such a server was retried as a short read, then StorageUnavailable."""
    found = store(endpoint="http://127.0.0.1:19")
    reader = s3_store._reader(found.options, found.policy)
    reader._session = Session(Answered(304, {"ETag": '"e"', "Content-Length": "27"}))  # type: ignore[assignment]
    with pytest.raises(NotModified):
        found.read("latest", if_none_match='"e"')


class Answered:
    def __init__(self, status: int, headers: dict[str, str], content: bytes = b"") -> None:
        self.status_code, self.headers, self.content = status, headers, content


class Session:
    """Answers every signed read with `answer`, and keeps the requests."""

    def __init__(self, answer: Answered) -> None:
        self.answer, self.seen = answer, list[Any]()

    def send(self, request: Any) -> Answered:
        self.seen.append(request)
        return self.answer
