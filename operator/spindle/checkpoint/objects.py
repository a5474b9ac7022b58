"""Object storage by URI: `file:///path` (the embedded default) or `s3://bucket/prefix`.

`open_objects` is the factory; the operations and types live in `blobs` (re-exported here), which
the backends import, so the factory sits above its backends and not in a cycle with them.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from spindle.checkpoint.blobs import (
    Blob,
    Listed,
    ObjectNotFound,
    ObjectStore,
    PreconditionFailed,
    S3Options,
    invalid_uri,
    join,
)
from spindle.checkpoint.file_store import FileStore
from spindle.checkpoint.retry import RetryPolicy
from spindle.checkpoint.s3_store import S3Store

__all__ = [
    "Blob",
    "Listed",
    "ObjectNotFound",
    "ObjectStore",
    "PreconditionFailed",
    "S3Options",
    "invalid_uri",
    "join",
    "open_objects",
]


def open_objects(
    uri: str, *, s3: S3Options | None = None, retry: RetryPolicy | None = None
) -> ObjectStore:
    """The backend for a URI; a plain path means a local directory."""
    parsed = urlparse(uri)
    policy = retry or RetryPolicy()
    if parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme else uri).expanduser().resolve()
        return FileStore(path)
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise invalid_uri(uri, "an S3 URI needs a bucket: s3://bucket/prefix")
        return S3Store(parsed.netloc, parsed.path.strip("/"), s3 or S3Options.from_env(), policy)
    raise invalid_uri(uri, "use file:///path or s3://bucket/prefix")
