"""User-facing errors: one exception type carrying a CamelCase reason, a message and details.

Every error a user can cause is a `SpindleError`. Its `body()` is the Feldera error body
(`message`, `error_code`, `details`), so the CLI, the operator's status conditions and the
driver's reports all speak the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def internal(error: Exception) -> SpindleError:
    """An error no reason covers, as a user sees it: a Spindle bug, with how to report it."""
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
