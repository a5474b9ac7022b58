"""User-facing errors: one exception type carrying a CamelCase reason, a message and details.

Every error a user can cause is a `SpindleError`. Its `body()` is the Feldera error body
(`message`, `error_code`, `details`), so the CLI, the operator's status conditions and the
driver's reports all speak the same shape.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic is not imported by commands that only read SQL
    from pydantic import ValidationError


class SpindleError(Exception):
    """An error a user can act on: `reason` is CamelCase, `message` says what to do."""

    def __init__(self, *, reason: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def body(self) -> dict[str, Any]:
        return {"message": self.message, "error_code": self.reason, "details": self.details}

    def __repr__(self) -> str:
        return f"SpindleError(reason={self.reason!r}, message={self.message!r})"


def _no_spark(error: Exception) -> bool:
    root = (getattr(error, "name", None) or "").split(".")[0]
    return isinstance(error, ModuleNotFoundError) and root in ("pyspark", "py4j", "delta")


def _no_jvm(error: Exception) -> bool:
    return type(error).__name__ == "PySparkRuntimeError" and "JAVA_GATEWAY_EXITED" in str(error)


def _refused_by_disk(error: Exception) -> bool:
    return isinstance(error, OSError) and error.errno in (
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
    )


def _disk_message(error: Exception) -> str:
    assert isinstance(error, OSError)
    where = f" ({error.filename})" if error.filename else ""
    return (
        f"The file system refused a write: {error.strerror}{where}. Free space on the disk, "
        "or make it writable, then run the command again: nothing half-written was committed."
    )


ENVIRONMENT: tuple[tuple[Callable[[Exception], bool], str, Callable[[Exception], str]], ...] = (
    (
        _no_spark,
        "SparkUnavailable",
        lambda e: (
            f"The Spark runtime is not installed here ({e}): install Spindle with it, "
            "`pip install 'spindle[runtime]'`, or run the command where it is."
        ),
    ),
    (
        _no_jvm,
        "SparkUnavailable",
        lambda _: (
            "Spark's JVM did not start: Spindle needs a Java 17 runtime. Set JAVA_HOME "
            "to one, or put its `java` on PATH; what the JVM's launcher printed is above."
        ),
    ),
    (_refused_by_disk, "FileSystemRefused", _disk_message),
)
"""Errors of the machine, not of Spindle: (which, reason, what to do). Each was an
`InternalError`, "This is a Spindle bug"."""


def internal(error: Exception) -> SpindleError:
    """An error no reason covers, as a user sees it: a Spindle bug, with how to report it;
    one of the machine's (`ENVIRONMENT`) says what to fix instead."""
    for which, reason, message in ENVIRONMENT:
        if which(error):
            return SpindleError(reason=reason, message=message(error))
    return SpindleError(
        reason="InternalError",
        message=f"Unexpected {type(error).__name__}: {error}. This is a Spindle bug; "
        "rerun with SPINDLE_DEBUG=1 for a traceback and report it.",
    )


def located(*, reason: str, message: str, line: int, column: int, **details: Any) -> SpindleError:
    """An error about SQL text: the message and details carry the line and column."""
    return SpindleError(
        reason=reason,
        message=f"{message} (line {line}, column {column})",
        details={"line": line, "column": column, **details},
    )


def first_problem(error: ValidationError) -> tuple[str, str]:
    """The first validation problem as (dotted field path, message), for one clear message."""
    first = error.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")  # pydantic's, for our validators
    return ".".join(str(p) for p in first["loc"]), message
