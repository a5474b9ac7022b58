"""Object storage as the checkpoint store sees it: the few operations both backends offer.

Both backends (`file_store`, `s3_store`) implement `ObjectStore`: create-only writes
(`If-None-Match: *`) and compare-and-swap (`If-Match: <etag>`), which is all the commit protocol
needs. `objects.open_objects` picks the backend for a URI; the backends import only this module,
so the factory and its backends form no cycle.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from spindle.errors import SpindleError


class PreconditionFailed(Exception):
    """A conditional write lost: the object exists, or its ETag moved."""


class ObjectNotFound(Exception):
    pass


class NotModified(Exception):
    """A conditional read (`If-None-Match: <etag>`) found the object unchanged."""


@dataclass(frozen=True)
class Blob:
    data: bytes
    etag: str


@dataclass(frozen=True)
class Listed:
    key: str
    modified: datetime.datetime


class ObjectStore(Protocol):
    @property
    def uri(self) -> str: ...

    def read(self, key: str, *, if_none_match: str | None = None) -> Blob:
        """The object; `NotModified` when its ETag is still `if_none_match`."""
        ...

    def write(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str: ...

    def scan(self, prefix: str) -> list[Listed]: ...

    def delete(self, keys: list[str]) -> None: ...

    def child(self, key: str) -> ObjectStore: ...


@dataclass(frozen=True)
class S3Options:
    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    """Temporary credentials' token (SSO, an assumed role): signed into every request."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> S3Options:
        return cls(
            endpoint=env.get("SPINDLE_S3_ENDPOINT") or env.get("AWS_ENDPOINT_URL_S3"),
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
            access_key=env.get("AWS_ACCESS_KEY_ID"),
            secret_key=env.get("AWS_SECRET_ACCESS_KEY"),
            session_token=env.get("AWS_SESSION_TOKEN") or None,
        )

    def located(self, *, endpoint: str | None, region: str | None) -> S3Options:
        """These options with the endpoint and region a storage spec names, where it names them."""
        return replace(self, endpoint=endpoint or self.endpoint, region=region or self.region)


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts if p)])


def local_path(uri: str) -> str | None:
    """The absolute local path of a `file:` URI or a plain path; None for other schemes, and
    for a `file://host/` URI (Hadoop names its files with the host; it lists them). Read as
    Hadoop's `Path` reads it: the rest is the path, `%`, `?` and `#` included (a URI parser
    would take `#x` for a fragment, and `%20` for a space Hadoop keeps as three characters)."""
    scheme = _SCHEME.match(uri)
    if scheme is None:
        return os.path.abspath(uri)
    path = uri[scheme.end() :]
    if scheme.group(1).lower() != "file" or (path.startswith("//") and path[2:3] != "/"):
        return None
    return os.path.abspath(path.removeprefix("//") or "/")


def place(uri: str) -> str:
    """Where `uri` points, to compare with another however each is spelled: a local location
    as its absolute path through symlinks (`/a`, `file:/a`, `file:///a/`), an S3 one as
    `s3://bucket/key` (`s3a://` too); no trailing `/`."""
    local = local_path(uri)
    if local is not None:
        return os.path.realpath(local).rstrip("/") or "/"
    return uri.replace("s3a://", "s3://", 1).rstrip("/")


def relative(uri: str) -> bool:
    """Whether `uri` is a local path relative to the working directory (`dir`, `./dir`,
    `file:dir`): each command would read it from wherever it runs."""
    scheme = _SCHEME.match(uri)
    if scheme is None:
        return not uri.startswith(("/", "~"))
    return scheme.group(1).lower() == "file" and not uri[scheme.end() :].startswith("/")


def file_uri(path: str) -> str:
    """The `file:` URI of an absolute local path, spelled as `local_path` (and Hadoop) read it
    back: the path as it is, not percent-encoded (`Path.as_uri()` would turn a space into
    `%20`, a directory of that name for Hadoop)."""
    return f"file://{path}"


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def invalid_uri(uri: str, hint: str) -> SpindleError:
    return SpindleError(
        reason="InvalidStorageUri",
        message=f"Storage URI {uri!r} is not supported: {hint}.",
        details={"uri": uri},
    )
