"""Signed reads (`checkpoint.s3_reads`) where only AWS can answer: a bucket in another region
than the one configured. The S3 server used everywhere else has one region, so S3's redirect is
played here by a stand-in session that answers as AWS documents (301 with
`x-amz-bucket-region`); everything else about these reads runs against the real S3 server
(tests/integration/test_checkpoints.py)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.credentials import Credentials

from spindle.checkpoint.s3_reads import Reader, ShortRead


class Answered:
    def __init__(self, status: int, headers: dict[str, str], content: bytes = b"") -> None:
        self.status_code, self.headers, self.content = status, headers, content


class Aws:
    """Answers as S3 does for a bucket in eu-west-1; records where each request went and for
    which region it was signed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def send(self, request: Any) -> Answered:
        region = str(request.headers["Authorization"]).split("/")[2]  # Credential=k/date/region
        self.seen.append((request.url, region))
        if region != "eu-west-1":
            return Answered(301, {"x-amz-bucket-region": "eu-west-1"}, b"<Code>Redirect</Code>")
        return Answered(200, {"ETag": '"e"', "Content-Length": "2"}, b"{}")


def reader(endpoint: str, region: str) -> tuple[Reader, Aws]:
    found = Reader(
        endpoint=endpoint,
        region=region,
        credentials=Credentials("key", "secret"),
        connect_timeout=1.0,
        read_timeout=1.0,
    )
    aws = Aws()
    found._session = aws  # type: ignore[assignment]
    return found, aws


def test_a_bucket_in_another_region_is_read_there_and_remembered() -> None:
    found, aws = reader("https://s3.amazonaws.com", "us-east-1")
    answer = found.get("b", "p/latest")
    assert (answer.status, answer.body, answer.etag) == (200, b"{}", '"e"')
    assert aws.seen == [
        ("https://s3.amazonaws.com/b/p/latest", "us-east-1"),
        ("https://s3.eu-west-1.amazonaws.com/b/p/latest", "eu-west-1"),
    ]
    found.get("b", "p/latest")  # the bucket's region is known now: one request
    assert aws.seen[2:] == [("https://s3.eu-west-1.amazonaws.com/b/p/latest", "eu-west-1")]


def test_an_endpoint_of_ones_own_keeps_its_host_and_signs_for_the_buckets_region() -> None:
    found, aws = reader("http://127.0.0.1:9000", "us-east-1")
    assert found.get("b", "k").status == 200
    assert [url for url, _ in aws.seen] == ["http://127.0.0.1:9000/b/k"] * 2


def test_a_body_shorter_than_announced_is_a_short_read_not_an_object() -> None:
    found, aws = reader("https://s3.eu-west-1.amazonaws.com", "eu-west-1")
    aws.send = lambda request: Answered(200, {"Content-Length": "10"}, b"{}")  # type: ignore[method-assign]
    with pytest.raises(ShortRead):
        found.get("b", "k")


def test_a_store_without_credentials_says_so_before_any_request(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No keys in the options, the environment or a config file (and no instance metadata
    service asked): a read is refused at once with what to set, and nothing is sent."""
    from spindle.checkpoint.blobs import S3Options
    from spindle.checkpoint.retry import RetryPolicy
    from spindle.checkpoint.s3_store import S3Store
    from spindle.errors import SpindleError

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    options = S3Options(endpoint="http://127.0.0.1:9", region="us-east-1")
    store = S3Store("bucket", "p", options, RetryPolicy(deadline=1.0))
    with pytest.raises(SpindleError) as refused:
        store.read("latest")
    assert refused.value.reason == "StorageRequestRejected"
    assert "No S3 credentials were found" in refused.value.message
