"""A runtime version's SQL semantics on Spark, and the errors a view's data raises under them.

`spindle.versions.RUNTIME_SETTINGS` says what each runtime sets. `apply` sets it on the session
before each unit of work (a warm server's one session serves pipelines of either runtime).
`evaluating` turns what a view's rows raise under ANSI semantics (a division by zero, an
overflow, a cast or a date that does not parse, an index out of bounds) into `SqlRuntimeError`,
naming the view, where it is defined and what to change: these are the user's data and SQL,
not a Spindle bug.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import (
    AnalysisException,
    ArithmeticException,
    ArrayIndexOutOfBoundsException,
    DateTimeException,
    NumberFormatException,
)
from pyspark.sql import SparkSession

from spindle.errors import SpindleError
from spindle.program import View
from spindle.versions import RUNTIME_SETTINGS

DATA_ERRORS = (
    ArithmeticException,
    ArrayIndexOutOfBoundsException,
    DateTimeException,
    NumberFormatException,
)
"""What Spark raises for a row that ANSI semantics refuse (v1 gives NULL for each of them)."""

JAVA_DATA_ERRORS = frozenset(
    f"org.apache.spark.Spark{kind}Exception"
    for kind in ("Arithmetic", "ArrayIndexOutOfBounds", "DateTime", "NumberFormat")
)
"""The same errors as the JVM throws them: a write (Delta's included) wraps them in its own
`TASK_WRITE_FAILED`, which reaches Python as a plain Py4JJavaError."""


def java_causes(error: BaseException) -> Iterator[Any]:
    """The Java exception behind a Py4JJavaError, then its causes, outermost first (none for
    an error raised in Python)."""
    cause = getattr(error, "java_exception", None)
    while cause is not None:
        yield cause
        cause = cause.getCause()


def java_cause(error: BaseException, name: str) -> bool:
    """Whether `error` is or wraps a Java exception of class `name` (fully qualified) or of a
    subclass of it (Spark's `SparkFileNotFoundException` is a `java.io.FileNotFoundException`)."""
    for cause in java_causes(error):
        klass = cause.getClass()
        while klass is not None:
            if str(klass.getName()) == name:
                return True
            klass = klass.getSuperclass()
    return False


def cause(error: BaseException) -> str:
    """The innermost cause of a failed read or write, as `ExceptionName: first line of its
    message` (a Java exception's, not py4j's whole stack)."""
    causes = list(java_causes(error))
    if causes:
        root = causes[-1]
        name, text = str(root.getClass().getSimpleName()), str(root.getMessage() or "")
    else:
        name, text = type(error).__name__, str(error)
    return f"{name}: {text.strip().splitlines()[0] if text.strip() else '(no message)'}"


@contextlib.contextmanager
def storage_io(root: str) -> Iterator[None]:
    """A step's (or a bootstrap's) reads and writes: of the pipeline's state under `root`, and
    the input files Spark reads lazily while it writes them into tables. Storage refusing one,
    an I/O error that is not a lost file, is `StorageRefused`, which a driver retries
    (`runtime.loop`); anything else passes as it is (a refusal a connector already named,
    `InputUnreadable` or `OutputUnwritable`, among them, and a file Spark failed to read that
    the engine named: `StateFileMissing`, `InputUnreadable`)."""
    try:
        yield
    except (Py4JJavaError, OSError) as error:
        if not _refused(error):
            raise
        raise SpindleError(
            reason="StorageRefused",
            message=f"Storage refused a read or write: {cause(error)}. Check the health, free "
            f"space and permissions of the pipeline's storage ({root}) and of its inputs' "
            "files. The step did not complete: it is done again from the last checkpoint.",
            details={"uri": root},
        ) from error


def _refused(error: BaseException) -> bool:
    """Whether an error is storage refusing I/O: an `OSError`, or a Java `IOException` behind
    a Py4JJavaError, but not a lost file nor a row's data error."""
    if data_error(error) is not None or lost_file(error):
        return False
    if isinstance(error, OSError):
        return True
    return java_cause(error, "java.io.IOException")


_NOT_LOST = ("Permission denied", "Is a directory", "Not a directory")
"""What Java's file streams also report as a `FileNotFoundException`: the file is there."""


def lost_file(error: BaseException) -> bool:
    """Whether `error` says a file is gone (not merely unreadable: Java reports a permission
    it lacks as a `FileNotFoundException` too)."""
    if isinstance(error, FileNotFoundError):
        return True
    if not java_cause(error, "java.io.FileNotFoundException"):
        return False
    return not any(reason in said(error) for reason in _NOT_LOST)


def said(error: BaseException) -> str:
    """Every message `error` and its Java causes carry, joined (to find a path or a reason
    in)."""
    messages = [str(error).splitlines()[0] if str(error) else ""]
    messages += [str(c.getMessage() or "") for c in java_causes(error)]
    return " ".join(messages)


def _conditioned(error: BaseException, prefix: str) -> Any:
    """The first of `error` (a PySpark exception) and its Java causes whose error condition
    starts with `prefix`, if any."""
    for cause in (error, *java_causes(error)):
        if str(_call(cause, "getCondition") or "").startswith(prefix):
            return cause
    return None


def raised(error: BaseException, mark: str) -> list[str] | None:
    """The tab-separated fields after `mark` of the message a query's `raise_error` gave,
    when `error` is or wraps it; None for any other error."""
    cause = _conditioned(error, "USER_RAISED_EXCEPTION")
    if cause is None:
        return None
    fields = str(cause.getMessageParameters().get("errorMessage") or "").split("\t")
    return fields[1:] if fields[0] == mark else None


_CSV_HEADER = ("CSV header does not conform", "Number of column in CSV header")


def csv_header_mismatch(error: BaseException) -> str | None:
    """What Spark found in a CSV file's header that does not name the schema's columns (its
    header check, `enforceSchema` off), said for a user (`it reads ..., the columns are ...`);
    None for any other error."""
    for cause in java_causes(error):
        text = str(cause.getMessage() or "")
        if text.startswith(_CSV_HEADER):
            found = dict(
                line.strip().split(": ", 1) for line in text.splitlines() if ": " in line.strip()
            )
            if "Header" in found and "Schema" in found:
                return f"it reads `{found['Header']}`, the columns are `{found['Schema']}`"
            fields, _, size = found.get("Header length", "?").partition(", schema size: ")
            return f"it has {fields} fields for {size or 'a different number of'} columns"
    return None


def failed_file(error: BaseException) -> str | None:
    """The file Spark names when it failed to read one (`FAILED_READ_FILE.*`: corrupt, not in
    the format read, gone), as it spells it; None for any other error."""
    cause = _conditioned(error, "FAILED_READ_FILE")
    path = decoded_path(str(cause.getMessageParameters().get("path") or "")) if cause else ""
    # as Hadoop names a local file (`file:/a`), where Spark says `file:///a`
    return "file:/" + path[len("file:///") :] if path.startswith("file:///") else path or None


_RAW = re.compile(r"\s|%(?![0-9A-Fa-f]{2})")
"""What URL encoding would have escaped: a path holding it is not encoded."""


def decoded_path(path: str) -> str:
    """A path Spark names as its file scan does, URL-encoded (a space is %20), decoded as the
    file's location is written; one Spark names raw (a footer read) is left as it is."""
    return path if _RAW.search(path) else unquote(path)


def _call(java: Any, method: str) -> Any:
    """`java.method()`, or None when its class has no such method (not a SparkThrowable)."""
    try:
        return getattr(java, method)()
    except (Py4JError, AttributeError):
        return None


def data_error(error: BaseException) -> tuple[str, str] | None:
    """The condition (`DIVIDE_BY_ZERO`, ...) and first message line of a data error that
    `error` is or wraps; None for any other error."""
    if isinstance(error, DATA_ERRORS):
        return error.getCondition() or type(error).__name__, str(error).splitlines()[0]
    for cause in java_causes(error):
        if cause.getClass().getName() in JAVA_DATA_ERRORS:
            return str(cause.getCondition()), str(cause.getMessage()).splitlines()[0]
    return None


def apply(spark: SparkSession, *, version: str) -> None:
    """Give `spark` the semantics of runtime `version`."""
    for key, value in RUNTIME_SETTINGS[version].items():
        spark.conf.set(key, value)


_UNSTORABLE = re.compile(
    r"UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE\].*?the column `(?P<column>[^`]+)` of the type "
    r"\"(?P<type>[^\"]+)\""
)


def _unstorable(view: View, error: AnalysisException) -> SpindleError | None:
    """`UnsupportedType` for a view with a column Delta cannot store (an INTERVAL, from `d1 -
    d2` or `ts - TIMESTAMP '...'`), which the plan cannot see (it knows no types yet)."""
    found = _UNSTORABLE.search(str(error))
    if found is None:
        return None
    column, kind = found["column"], found["type"]
    return SpindleError(
        reason="UnsupportedType",
        message=f"View '{view.name}' ({view.where}) has the column '{column}' of type {kind}, "
        "which Spindle cannot store. Make it a number (DATEDIFF(a, b) for days, "
        "UNIX_SECONDS(a) - UNIX_SECONDS(b) for seconds) or a string (CAST(... AS STRING)).",
        details={**view.located, "column": column, "type": kind},
    )


@contextlib.contextmanager
def evaluating(view: View, *, version: str) -> Iterator[None]:
    """Run the evaluation of `view`; a data error becomes `SqlRuntimeError`."""
    try:
        yield
    except AnalysisException as error:
        stored = _unstorable(view, error)
        if stored is None:
            raise
        raise stored from None
    except (*DATA_ERRORS, Py4JJavaError) as error:
        found = data_error(error)
        if found is None:
            raise
        condition, text = found
        first = text.split(". ", 1)[0].rstrip(".") + "."  # not Spark's hint about its settings
        ansi = RUNTIME_SETTINGS[version].get("spark.sql.ansi.enabled") == "true"
        advice = (
            f"Runtime {version} follows ANSI SQL and stops where runtime v1 gives NULL: guard "
            "the expression (NULLIF, TRY_CAST, try_divide, try_element_at), or pin "
            "spec.runtimeVersion: v1."
            if ansi
            else "Fix the expression, or the rows that make it fail."
        )
        raise SpindleError(
            reason="SqlRuntimeError",
            message=f"View '{view.name}' ({view.where}) cannot be evaluated under runtime "
            f"{version}: {first} {advice}",
            details={**view.located, "condition": condition},
        ) from None
