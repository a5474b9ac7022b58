"""Object storage by URI: `file:///path` (the embedded default) or `s3://bucket/prefix`.

`open_objects` is the factory; the operations and types live in `blobs` (re-exported here), which
the backends import, so the factory sits above its backends and not in a cycle with them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

from spindle.checkpoint.blobs import (
    Blob,
    Listed,
    NotModified,
    ObjectNotFound,
    ObjectStore,
    PreconditionFailed,
    S3Options,
    file_uri,
    invalid_uri,
    join,
    local_path,
    place,
    relative,
)
from spindle.checkpoint.file_store import FileStore
from spindle.checkpoint.retry import RetryPolicy
from spindle.checkpoint.s3_store import S3Store

__all__ = [
    "Blob",
    "Listed",
    "NotModified",
    "ObjectNotFound",
    "ObjectStore",
    "PreconditionFailed",
    "S3Options",
    "file_uri",
    "invalid_uri",
    "join",
    "local_path",
    "open_objects",
    "place",
    "relative",
]


BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]$")
"""A bucket name S3 may hold (the legacy rules, which are a superset of today's): checked here,
so that a name no server accepts is refused at once instead of retried until the deadline."""


def open_objects(
    uri: str, *, s3: S3Options | None = None, retry: RetryPolicy | None = None
) -> ObjectStore:
    """The backend for a URI; a plain path means a local directory."""
    parsed = urlparse(uri)
    policy = retry or RetryPolicy()
    if parsed.scheme in ("", "file"):
        local = local_path(uri if parsed.scheme else os.path.expanduser(uri))
        if local is None:
            raise invalid_uri(uri, "a file: URI names a path on this machine: file:///path")
        return FileStore(Path(local).resolve())
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise invalid_uri(uri, "an S3 URI needs a bucket: s3://bucket/prefix")
        if not BUCKET.match(parsed.netloc):
            raise invalid_uri(
                uri,
                f"{parsed.netloc!r} is not an S3 bucket name (3 to 255 letters, digits, dots, "
                "hyphens and underscores); check the bucket in spec.storage.uri",
            )
        return S3Store(parsed.netloc, parsed.path.strip("/"), s3 or S3Options.from_env(), policy)
    raise invalid_uri(uri, "use file:///path or s3://bucket/prefix")
