"""Reads from S3 as plain signed GETs, beside the boto3 client that does everything else.

The operator reads a checkpoint pointer for every reconcile, and once a re-list for every
pipeline whose driver is active, and nearly all of those reads are answered `304 Not Modified`.
Through boto3 such a read costs about 0.85 ms of the process's CPU (parameter validation, the
event hooks, and the error it raises for a 304); signed by botocore's own SigV4 signer and sent
through botocore's own HTTP session it costs about 0.35 ms.

What boto3 resolved stays boto3's: the endpoint URL and region come from the client
(`s3_store._client`: the options, `AWS_ENDPOINT_URL_S3`, the config file, the partition), the
credentials from the same chain, frozen per request (a refreshable role's keys never mix across
a refresh). What its read path did, this one does too: a bucket in another region than the one
configured answers with its region, which is remembered per bucket and signed for; a body
shorter than its `Content-Length` is a transient failure, not a corrupt object; proxies come
from the environment and the CA bundle is `AWS_CA_BUNDLE`, else `REQUESTS_CA_BUNDLE`. A
`Reader` answers with the status, ETag and body; `s3_store` builds one beside each client and
maps its answers to the store's outcomes, exactly as it maps boto3's errors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

_CODE = re.compile(rb"<Code>([^<]*)</Code>")
_AWS_HOST = re.compile(r"s3([.-][a-z0-9-]+)?\.amazonaws\.com")
"""AWS's own S3 endpoints (global or regional), which serve one region each."""
_REDIRECTS = frozenset({301, 307, 400})
"""What S3 answers a request signed for the wrong region with (and `x-amz-bucket-region`)."""


class ShortRead(Exception):
    """The connection ended before the body its `Content-Length` announced."""


@dataclass(frozen=True)
class Answer:
    status: int
    etag: str
    body: bytes
    region: str = ""
    """`x-amz-bucket-region`, when S3 says where the bucket is."""

    @property
    def code(self) -> str:
        """The S3 error code of an error answer (`NoSuchKey`, `AccessDenied`, ...), or ''."""
        found = _CODE.search(self.body)
        return found.group(1).decode(errors="replace") if found else ""


class Reader:
    """Signed GETs against one endpoint with one set of credentials; safe to share between
    threads (each request is signed on its own, and the session is a connection pool)."""

    def __init__(
        self,
        *,
        endpoint: str,
        region: str,
        credentials: Any,
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        from botocore.httpsession import URLLib3Session
        from botocore.utils import get_environ_proxies

        self._base, self._region, self._credentials = endpoint.rstrip("/"), region, credentials
        self._regions: dict[str, str] = {}
        """Buckets found in another region than `region` (from S3's own answer)."""
        # as botocore's endpoint builds its own session (its stubs type these two too narrowly)
        verify: Any = os.environ.get("AWS_CA_BUNDLE") or os.environ.get("REQUESTS_CA_BUNDLE")
        timeout: Any = (connect_timeout, read_timeout)
        self._session = URLLib3Session(
            verify=verify or True,
            proxies=get_environ_proxies(self._base),
            timeout=timeout,
            max_pool_connections=32,
        )

    def get(self, bucket: str, key: str, *, if_none_match: str | None = None) -> Answer:
        """One GET of `bucket/key` (two when the bucket turns out to be in another region);
        transport failures raise botocore's own errors, a short body `ShortRead`."""
        answer = self._get(bucket, key, if_none_match=if_none_match)
        moved = answer.region and answer.region != self._regions.get(bucket, self._region)
        if answer.status in _REDIRECTS and moved:
            self._regions[bucket] = answer.region
            answer = self._get(bucket, key, if_none_match=if_none_match)
        return answer

    def _get(self, bucket: str, key: str, *, if_none_match: str | None) -> Answer:
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest

        region = self._regions.get(bucket, self._region)
        headers = {"If-None-Match": if_none_match} if if_none_match is not None else {}
        url = f"{self._base_for(region)}/{quote(bucket)}/{quote(key, safe='/~')}"
        request = AWSRequest(method="GET", url=url, headers=headers)
        frozen = self._credentials.get_frozen_credentials()
        S3SigV4Auth(frozen, "s3", region).add_auth(request)
        response: Any = self._session.send(request.prepare())
        body = bytes(response.content or b"")
        announced = response.headers.get("Content-Length")  # a 304 may carry the object's
        bodied = response.status_code in (200, 206)
        if bodied and announced is not None and announced.isdigit() and int(announced) != len(body):
            raise ShortRead(f"{len(body)} of {announced} bytes")
        return Answer(
            status=int(response.status_code),
            etag=str(response.headers.get("ETag", "")),
            body=body,
            region=str(response.headers.get("x-amz-bucket-region", "")),
        )

    def _base_for(self, region: str) -> str:
        """The endpoint for a bucket in `region`: AWS's regional host when the configured one is
        AWS's own for another region; any other endpoint serves every region it has."""
        host = urlsplit(self._base).hostname or ""
        if region == self._region or not _AWS_HOST.fullmatch(host):
            return self._base
        return f"https://s3.{region}.amazonaws.com"
