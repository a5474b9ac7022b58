"""The local-directory backend (the embedded default).

Create-only writes link a fully written, fsynced temporary file into place (`link` fails if the
target exists). Compare-and-swap holds an exclusive lock on the object's lock file, compares the
current content hash with the expected ETag and renames a new file over it. Either way a reader
sees the old object or the new one, never a partial one.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spindle.checkpoint.blobs import (
    Blob,
    Listed,
    NotModified,
    ObjectNotFound,
    PreconditionFailed,
    file_uri,
)

_RACES = 5
"""Times a write creates its directory again when a concurrent `delete` removed it (emptied)."""


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _holds_only_empty_directories(directory: Path) -> bool:
    return all(
        child.is_dir() and not child.is_symlink() and _holds_only_empty_directories(child)
        for child in directory.iterdir()
    )


def _removed(directory: Path, *, with_empty_subdirectories: bool) -> bool:
    """Remove `directory` if it is empty or, `with_empty_subdirectories`, holds nothing but
    empty directories (checked before anything is removed); whether it is gone."""
    try:
        if not with_empty_subdirectories:
            directory.rmdir()
            return True
        if not _holds_only_empty_directories(directory):
            return False
        for folder, _, _ in os.walk(directory, topdown=False):
            os.rmdir(folder)
    except FileNotFoundError:  # removed by a concurrent delete
        return True
    except OSError:  # not empty, written to meanwhile, or unreadable: it stays
        return False
    return True


@dataclass(frozen=True)
class FileStore:
    root: Path

    @property
    def uri(self) -> str:
        return file_uri(str(self.root))

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in (path, *path.parents):  # `../x` as a checkpoint id: no
            raise ObjectNotFound(key)  # object of the store has that key
        return path

    def read(self, key: str, *, if_none_match: str | None = None) -> Blob:
        try:
            data = self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        etag = _etag(data)
        if etag == if_none_match:
            raise NotModified(key)
        return Blob(data, etag)

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        lock = path.with_name(f".{path.name}.lock")
        with lock.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _temporary(self, path: Path, data: bytes) -> Path:
        """`data` in a file of its own beside `path`; none is left when writing it fails (a
        full disk left a partial `.tmp` file at each attempt)."""
        temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with temp.open("wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return temp

    def write(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        path = self._path(key)
        for attempt in range(_RACES):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                temp = self._temporary(path, data)
                break
            except (FileNotFoundError, FileExistsError):  # a concurrent delete emptied and
                if attempt == _RACES - 1:  # removed the directory (while it was made, or after)
                    raise
        try:
            with self._locked(path):
                if if_none_match:
                    try:
                        os.link(temp, path)
                    except FileExistsError:
                        raise PreconditionFailed(key) from None
                else:
                    if if_match is not None:
                        try:
                            current = _etag(path.read_bytes())
                        except FileNotFoundError:
                            raise PreconditionFailed(key) from None
                        if current != if_match:
                            raise PreconditionFailed(key)
                    os.replace(temp, path)
                _fsync_dir(path.parent)
        finally:
            temp.unlink(missing_ok=True)
        return _etag(data)

    def scan(self, prefix: str) -> list[Listed]:
        base = self._path(prefix) if prefix else self.root
        if not base.exists():
            return []
        found = []
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith("."):
                stat = path.stat()
                found.append(
                    Listed(
                        str(path.relative_to(self.root)),
                        datetime.datetime.fromtimestamp(stat.st_mtime, datetime.UTC),
                    )
                )
        return sorted(found, key=lambda item: item.key)

    def delete(self, keys: list[str]) -> None:
        """Delete objects with their hidden companions (our `.x.lock`, Hadoop's `.x.crc`
        checksums beside files Spark wrote), then directories this left empty. A directory that
        held a deleted object counts as empty when it holds only empty directories (Delta makes
        `_delta_log/_staged_commits/` and never writes to it); one above it must be empty."""
        parents: set[Path] = set()
        for key in keys:
            path = self._path(key)
            path.unlink(missing_ok=True)
            for companion in (f".{path.name}.lock", f".{path.name}.crc"):
                path.with_name(companion).unlink(missing_ok=True)
            parents.add(path.parent)
        root = self.root.resolve()
        for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
            directory = parent
            while directory != root and root in directory.parents:
                if not _removed(directory, with_empty_subdirectories=directory in parents):
                    break
                directory = directory.parent

    def child(self, key: str) -> FileStore:
        return FileStore(self._path(key))
