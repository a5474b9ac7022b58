"""Program text from the bytes of a file: UTF-8, with or without a byte order mark.

Files come from users (`spindle diff`, fuzzed inputs): a binary file, another encoding or a
truncated multi-byte character is refused as `InvalidProgram` at the line and column of the
first bad byte, and a file over the size limit is refused before it is decoded.
"""

from __future__ import annotations

import codecs

from spindle.errors import located
from spindle.program.limits import MAX_PROGRAM_BYTES, position, too_large


def program_text(data: bytes) -> str:
    """Decode a program file (UTF-8; a leading BOM is dropped). Raises `SpindleError`."""
    if len(data) > MAX_PROGRAM_BYTES:
        raise too_large(len(data))
    return utf8_text(data, what="the program", reason="InvalidProgram")


def utf8_text(data: bytes, *, what: str, reason: str) -> str:
    """Decode a user's file as UTF-8 (a leading BOM is dropped), or raise `reason` at the line
    and column of its first byte that is not UTF-8."""
    body = data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        before = body[: error.start].decode("utf-8")
        where = position(before, len(before))
        raise located(
            reason=reason,
            message=f"Byte 0x{body[error.start]:02X} is not UTF-8 text; save {what} as "
            "UTF-8 (is the file binary, or in another encoding?)",
            line=where.line,
            column=where.column,
            byte_offset=error.start + len(data) - len(body),
        ) from None
