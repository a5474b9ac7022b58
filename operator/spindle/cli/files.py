"""Reading the files a user names on the command line (programs, manifests; `-` is stdin).

Whatever is wrong with the file (missing, a directory, no permission, empty, endless, binary)
becomes a `SpindleError` that names the file and says what to do, never a traceback: most
failures are `FileUnreadable`, a program that is not UTF-8 is `InvalidProgram` at the line and
column of the first bad byte, and one over the size limit is `ProgramTooLarge`.

A manifest is YAML, and YAML aliases can make a few hundred bytes stand for a billion values
(the "billion laughs" bomb). `load_yaml` counts what the aliases expand to before building
anything, and refuses more than `MAX_YAML_VALUES` (`InvalidManifest`), as kubectl and the API
server refuse "excessive aliasing": Spindle never expands, stores or prints a bomb.
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
from collections.abc import Callable
from typing import Any

import yaml

from spindle.errors import SpindleError
from spindle.program.limits import MAX_PROGRAM_BYTES, check_program, too_large
from spindle.program.source import program_text, utf8_text

MAX_MANIFEST_BYTES = 2 * MAX_PROGRAM_BYTES
"""A manifest holds one program and a little YAML around it."""
MAX_YAML_VALUES = 100_000
"""Scalars, sequences and mappings a manifest may hold once its aliases are expanded; a Pipeline
has a few dozen, plus its Spark settings."""

_HINTS = {
    errno.ENOENT: "check the path",
    errno.EISDIR: "pass a file, not a directory",
    errno.EACCES: "check its permissions, or run as a user who may read it",
    errno.EPERM: "check its permissions, or run as a user who may read it",
}


def _unreadable(path: str, problem: str, hint: str) -> SpindleError:
    expanded = os.path.expanduser(path)
    shown = path if expanded == path else f"{path} ({expanded})"
    return SpindleError(
        reason="FileUnreadable",
        message=f"Cannot read {shown}: {problem}; {hint}.",
        details={"path": path},
    )


def read_bytes(
    path: str, *, limit: int, too_large: Callable[[int], SpindleError] | None = None
) -> bytes:
    """The bytes of a file. Missing, unreadable, empty and larger than `limit` (`too_large`
    builds that error) are refused; an endless stream is read no further than the limit. A
    leading `~` is the user's home, as in `--home`: the shell leaves it in `--file=~/p.yaml`."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit + 1)
            size = len(data)
        else:
            with open(os.path.expanduser(path), "rb") as file:
                data = file.read(limit + 1)
                size = max(len(data), os.fstat(file.fileno()).st_size)
    except OSError as error:
        problem = error.strerror or type(error).__name__
        raise _unreadable(path, problem, _HINTS.get(error.errno or 0, "check the path")) from None
    if size > limit:
        if too_large is not None:
            raise in_file(too_large(size), path)
        raise _unreadable(
            path, f"it is {size:,} bytes, more than {limit:,}", "is it the file you meant?"
        )
    if not data.strip():
        raise _unreadable(path, "it is empty", "check that it is the file you meant, and saved")
    return data


def read_program(path: str) -> str:
    """A program file's text; errors name the file."""
    data = read_bytes(path, limit=MAX_PROGRAM_BYTES, too_large=too_large)
    try:
        text = program_text(data)
        check_program(text)  # before any statement is analyzed, in parallel or not
    except SpindleError as error:
        raise in_file(error, path) from None
    return text


def in_file(error: SpindleError, path: str) -> SpindleError:
    """The error with the file it is about in its message and details."""
    error.details.setdefault("file", path)
    if not error.message.startswith(f"{path}: "):
        error.message = f"{path}: {error.message}"
    return error


def _expands_beyond(root: yaml.Node, limit: int) -> bool:
    """Whether the node tree, each alias visited again where it is used, has more than `limit`
    nodes. Stops counting at the limit, so a bomb (or an alias to its own ancestor) costs at
    most `limit` steps."""
    seen, stack = 0, [root]
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend((key, value))
    return False


def load_yaml(data: bytes, *, path: str) -> Any:
    """One YAML or JSON document from a manifest file, safely: no Python objects, no bombs."""
    loader: yaml.SafeLoader | None = None
    if not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # else YAML's to read
        try:
            utf8_text(data, what="the manifest", reason="FileUnreadable")
        except SpindleError as error:
            raise in_file(error, path) from None
    try:
        loader = yaml.SafeLoader(data)  # decoding starts here: bytes that are not text fail
        node = loader.get_single_node()
        if node is not None and _expands_beyond(node, MAX_YAML_VALUES):
            raise SpindleError(
                reason="InvalidManifest",
                message=f"{path}: its YAML aliases expand to more than {MAX_YAML_VALUES:,} "
                "values (a YAML bomb, or an alias inside its own anchor). Write the manifest "
                "out without anchors and aliases.",
                details={"source": path},
            )
        return None if node is None else loader.construct_document(node)
    except (RecursionError, yaml.reader.ReaderError) as error:
        raise SpindleError(
            reason="FileUnreadable",
            message=f"Cannot read {path} as a manifest: {error}. Save it as UTF-8 YAML or "
            "JSON text, holding one Pipeline.",
            details={"path": path},
        ) from None
    except yaml.YAMLError as error:
        said = str(error).replace('"<byte string>"', path)  # PyYAML names bytes so
        raise SpindleError(
            reason="InvalidManifest",
            message=f"{path} is not valid YAML or JSON: {said}",
            details={"source": path},
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
