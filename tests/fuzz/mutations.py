"""Seeded mutations of a program, one table of them: each takes a random source and the text.

Text mutations (tokens, quotes, types, connectors, nesting, size, names, line endings, cycles)
return text; byte mutations (invalid UTF-8, byte order marks, binary files) return the bytes of
a file. `mutant(index, seed=...)` is a pure function of its arguments, so any mutant of a run can
be rebuilt from its number alone.
"""

from __future__ import annotations

import codecs
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from tests.fuzz.seeds import seeds

TOKEN = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\w+|\S", re.DOTALL
)
DECLARED = re.compile(r"create\s+(?:materialized\s+)?(table|view|function)\s+(\w+)", re.I)
TYPE = re.compile(
    r"\b(?:int|integer|bigint|varchar|string|text|date|timestamp|double|boolean|"
    r"decimal\s*\(\s*\d+\s*,\s*\d+\s*\))\b",
    re.I,
)
CONNECTORS = re.compile(r"'connectors'\s*=\s*'((?:[^']|'')*)'", re.I)
RESERVED = (
    "select",
    "from",
    "where",
    "table",
    "view",
    "group",
    "order",
    "join",
    "union",
    "create",
    "null",
    "true",
    "case",
    "with",
    "as",
    "on",
    "lateness",
    "materialized",
)
UNKNOWN_TYPES = (
    "FOOBAR",
    "INT2048",
    "VARCHAR(99999999999999999999)",
    "GEOMETRY",
    "ROW(a INT)",
    "MAP<INT, >",
    "INT ARRAY ARRAY",
    "STRUCT<>",
    "VECTOR(3)",
    "TIMESTAMP(99)",
    "UUID",
    "DECIMAL(5, 2",
    "CHAR(-1)",
    "VARCHAR()",
    "INTERVAL",
)
PRECISIONS = (
    "1000000000000000000000000, 2",
    "0",
    "-1, 0",
    "39",
    "38, 39",
    "1" + "0" * 5000,
    "99999999999999999999999999999999999999999999999, 99",
    "5, -3",
    "1e400",
    "0x10",
)
STRAY = ("'", '"', "`", "(", ")", ";", "/*", "--", "[", "]", "{", "}", ",", ".", "*", "\\")
UNICODE = (
    "é",
    "😀",
    "\u200b",
    "\u202e",
    "\u0301",
    "\ufffd",
    "\u2028",
    "\x85",
    "\x0b",
    "\x0c",
    "\x1b",
    "\x7f",
    "\ufeff",
    "\U000e0001",
)
BAD_BYTES = (
    b"\xff",
    b"\xfe",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xc0\xaf",
    b"\x80",
)
JSON_BREAKERS = ("{", "}", "[", "]", '"', ",", ":", "\\", "\\u", "\\ud800", "NaN", "''")
TEN_MB = 10 * 1024 * 1024
DEPTH = 5000
CHAIN = 1100  # longer than Python's recursion limit


def _spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in TOKEN.finditer(text)]


def _at(rng: random.Random, text: str) -> int:
    return rng.randrange(len(text) + 1)


def _a_table(text: str) -> tuple[str, str]:
    """A table the program declares (and no extra text), or a new one (and its declaration)."""
    tables = [m.group(2) for m in DECLARED.finditer(text) if m.group(1).lower() == "table"]
    return (tables[0], "") if tables else ("fuzz_t", "\ncreate table fuzz_t (a int);")


def delete_token(rng: random.Random, text: str) -> str:
    spans = _spans(text)
    if not spans:
        return text
    start, end = rng.choice(spans)
    return text[:start] + text[end:]


def duplicate_token(rng: random.Random, text: str) -> str:
    spans = _spans(text)
    if not spans:
        return text + text
    start, end = rng.choice(spans)
    return text[:end] + " " + text[start:end] + text[end:]


def swap_tokens(rng: random.Random, text: str) -> str:
    spans = _spans(text)
    if len(spans) < 2:
        return text[::-1]
    (a, b), (c, d) = sorted(rng.sample(spans, 2))
    return text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]


def truncate(rng: random.Random, text: str) -> str:
    return text[: rng.randrange(len(text) + 1)]


def stray_punctuation(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 3)):
        where = _at(rng, text)
        text = text[:where] + rng.choice(STRAY) + text[where:]
    return text


def _replace_type(rng: random.Random, text: str, new: str) -> str:
    found = list(TYPE.finditer(text))
    if not found:
        return text + f"\ncreate table fuzz_types (a {new});"
    match = rng.choice(found)
    return text[: match.start()] + new + text[match.end() :]


def unknown_type(rng: random.Random, text: str) -> str:
    return _replace_type(rng, text, rng.choice(UNKNOWN_TYPES))


def absurd_decimal(rng: random.Random, text: str) -> str:
    return _replace_type(rng, text, f"DECIMAL({rng.choice(PRECISIONS)})")


def _broken_json(rng: random.Random, raw: str) -> str:
    choice = rng.randrange(6)
    if choice == 0 and raw:
        where = rng.randrange(len(raw))
        return raw[:where] + raw[where + 1 :]
    if choice == 1:
        return "[" * 100_000
    if choice == 2:
        return '[{"transport": {"name": "x"}, "size": ' + "9" * 5000 + "}]"
    if choice == 3:
        return rng.choice(
            (
                '[{"transport": {"name": 1}}]',
                '[{"name": ""}]',
                "null",
                "{}",
                "[1]",
                '"text"',
                '[{"transport": {"name": "a"}, "name": "a"}, '
                '{"transport": {"name": "b"}, "name": "a"}]',
                "[NaN]",
            )
        )
    where = _at(rng, raw)
    return raw[:where] + rng.choice(JSON_BREAKERS) + raw[where:]


def corrupt_connectors(rng: random.Random, text: str) -> str:
    found = list(CONNECTORS.finditer(text))
    if not found:
        json = _broken_json(rng, '[{"name": "c", "transport": {"name": "kafka_input"}}]')
        return text + f"\ncreate table fuzz_c (a int) with ('connectors' = '{json}');"
    match = rng.choice(found)
    broken = _broken_json(rng, match.group(1)).replace("'", "''")
    return text[: match.start(1)] + broken + text[match.end(1) :]


NESTINGS: tuple[Callable[[str], str], ...] = (
    lambda t: f"select {'(' * DEPTH}1{')' * DEPTH} as x from {t}",
    lambda t: f"{'select * from (' * DEPTH}select * from {t}{') s' * DEPTH}",
    lambda t: f"select {'abs(' * DEPTH}1{')' * DEPTH} as x from {t}",
    lambda t: f"select 1 as x from {t} where {'not ' * DEPTH}true",
    lambda t: f"select {'case when true then ' * DEPTH}1{' end' * DEPTH} as x from {t}",
    lambda t: f"select {'- ' * DEPTH}1 as x from {t}",
    lambda t: f"select {' + '.join(['1'] * DEPTH)} as x from {t}",
    lambda t: f"select * from {t} where 1 in ({'select 1 where 1 in (' * DEPTH}1{')' * DEPTH})",
)


def deep_nesting(rng: random.Random, text: str) -> str:
    table, declaration = _a_table(text)
    return text + declaration + f"\ncreate view fuzz_deep as {rng.choice(NESTINGS)(table)};"


def huge_program(rng: random.Random, text: str) -> str:
    if rng.random() < 0.5:
        return text + "\n-- " + "x" * TEN_MB
    copies = TEN_MB // max(len(text), 1) + 1
    return "\n".join([text] * copies)


def long_identifier(rng: random.Random, text: str) -> str:
    name = "x" * 100_000 if rng.random() < 0.5 else '"' + "Y" * 100_000 + '"'
    words = [m for m in re.finditer(r"\b[a-z_]\w*\b", text)]
    if not words:
        return text + f"\ncreate table {name} (a int);"
    match = rng.choice(words)
    return text[: match.start()] + name + text[match.end() :]


def _insert(rng: random.Random, text: str, pieces: tuple[str, ...]) -> str:
    for _ in range(rng.randint(1, 3)):
        where = _at(rng, text)
        text = text[:where] + rng.choice(pieces) + text[where:]
    return text


def nul_bytes(rng: random.Random, text: str) -> str:
    return _insert(rng, text, ("\x00",))


def lone_surrogate(rng: random.Random, text: str) -> str:
    return _insert(rng, text, ("\ud800", "\udfff"))


def odd_characters(rng: random.Random, text: str) -> str:
    return _insert(rng, text, UNICODE)


def crlf(rng: random.Random, text: str) -> str:
    choice = rng.randrange(3)
    if choice == 0:
        return text.replace("\n", "\r\n")
    if choice == 1:
        return "".join(p + rng.choice(("\n", "\r\n")) for p in text.split("\n"))[:-1]
    return text.replace("\n", "\r")


def view_cycle(rng: random.Random, text: str) -> str:
    size = rng.randint(1, 3)
    names = [f"fuzz_cycle{i}" for i in range(size)]
    views = [
        f"create view {name} as select * from {names[(i + 1) % size]};"
        for i, name in enumerate(names)
    ]
    rng.shuffle(views)
    return text + "\n" + "\n".join(views)


def duplicate_name_case(rng: random.Random, text: str) -> str:
    declared = list(DECLARED.finditer(text))
    kind, name = (rng.choice(declared).groups()) if declared else ("table", "fuzz_dup")
    other = name.upper() if name != name.upper() else name.lower()
    body = {
        "table": f"table {other} (a int)",
        "view": f"view {other} as select 1 as a",
        "function": f"function {other}(x int) returns int as x",
    }[kind.lower()]
    prefix = "" if declared else f"\ncreate table {name} (a int);"
    return text + prefix + f"\ncreate {body};"


def reserved_word_name(rng: random.Random, text: str) -> str:
    declared = list(DECLARED.finditer(text))
    word = rng.choice(RESERVED)
    if not declared:
        return text + f"\ncreate table {word} (a int);"
    match = rng.choice(declared)
    return text[: match.start(2)] + word + text[match.end(2) :]


def long_chain(rng: random.Random, text: str) -> str:
    """Views (or functions) that each read the one before, declared last one first."""
    if rng.random() < 0.5:
        functions = [
            f"create function fuzz_f{i}(x int) returns int as {f'fuzz_f{i - 1}(x)' if i else 'x'};"
            for i in range(CHAIN)
        ]
        return text + "\n" + "\n".join(reversed(functions))
    table, declaration = _a_table(text)
    views = [
        f"create view fuzz_v{i} as select * from {f'fuzz_v{i - 1}' if i else table};"
        for i in range(CHAIN)
    ]
    return text + declaration + "\n" + "\n".join(reversed(views))


def unclosed(rng: random.Random, text: str) -> str:
    """Thousands of comments, strings or quoted names that never end."""
    opener = rng.choice(("/* ", "' ", '" ', "( ", "`"))
    return text[: _at(rng, text)] + opener * 30_000


def splice(rng: random.Random, text: str) -> str:
    _, other = rng.choice(seeds())
    statements = [s for s in other.split(";") if s.strip()]
    where = rng.choice([0, len(text), *(m.end() for m in re.finditer(";", text))])
    return text[:where] + "\n" + rng.choice(statements) + ";\n" + text[where:]


TEXT_MUTATIONS: dict[str, Callable[[random.Random, str], str]] = {
    "delete_token": delete_token,
    "duplicate_token": duplicate_token,
    "swap_tokens": swap_tokens,
    "truncate": truncate,
    "stray_punctuation": stray_punctuation,
    "unknown_type": unknown_type,
    "absurd_decimal": absurd_decimal,
    "corrupt_connectors": corrupt_connectors,
    "deep_nesting": deep_nesting,
    "huge_program": huge_program,
    "long_identifier": long_identifier,
    "nul_bytes": nul_bytes,
    "lone_surrogate": lone_surrogate,
    "odd_characters": odd_characters,
    "crlf": crlf,
    "view_cycle": view_cycle,
    "duplicate_name_case": duplicate_name_case,
    "reserved_word_name": reserved_word_name,
    "long_chain": long_chain,
    "unclosed": unclosed,
    "splice": splice,
}


def invalid_utf8(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.randint(1, 3)):
        where = rng.randrange(len(data) + 1)
        data = data[:where] + rng.choice(BAD_BYTES) + data[where:]
    return data


def byte_order_mark(rng: random.Random, data: bytes) -> bytes:
    choice = rng.randrange(4)
    if choice == 0:
        return codecs.BOM_UTF8 + data
    if choice == 1:
        return codecs.BOM_UTF8 * 2 + data
    if choice == 2:
        where = rng.randrange(len(data) + 1)
        return data[:where] + codecs.BOM_UTF8 + data[where:]
    return codecs.BOM_UTF16_LE + data.decode("utf-8", "surrogatepass").encode(
        "utf-16-le", "surrogatepass"
    )


def truncate_bytes(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def binary(rng: random.Random, data: bytes) -> bytes:
    return rng.randbytes(rng.randint(1, 4096))


BYTE_MUTATIONS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "invalid_utf8": invalid_utf8,
    "byte_order_mark": byte_order_mark,
    "truncate_bytes": truncate_bytes,
    "binary": binary,
}

MUTATIONS = (*TEXT_MUTATIONS, *BYTE_MUTATIONS)


@dataclass(frozen=True)
class Mutant:
    index: int
    seed: str
    """The name of the program it was made from."""
    mutations: tuple[str, ...]
    data: str | bytes
    """Text goes to `parse_program` as is (what the API server hands over); bytes are a file,
    decoded by `program_text` first."""


def mutant(index: int, *, seed: int) -> Mutant:
    """Mutant number `index` of the run with this seed: 0 to 2 text mutations, then one drawn
    evenly from all of them; text is handed over as a file half of the time."""
    rng = random.Random(f"{seed}:{index}")
    name, text = rng.choice(seeds())
    applied = [rng.choice(list(TEXT_MUTATIONS)) for _ in range(rng.choice((0, 0, 1, 2)))]
    applied.append(rng.choice(MUTATIONS))
    # Bytes last (text mutations need text); the 10 MB program last among the text ones, so
    # that no other mutation works on it and the memory measured is the program layer's.
    applied.sort(key=lambda m: (m in BYTE_MUTATIONS, m == "huge_program"))
    data: str | bytes = text
    for mutation in applied:
        if mutation in TEXT_MUTATIONS:
            assert isinstance(data, str)
            data = TEXT_MUTATIONS[mutation](rng, data)
        else:
            raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
            data = BYTE_MUTATIONS[mutation](rng, raw)
    if isinstance(data, str) and rng.random() < 0.5:
        data = data.encode("utf-8", "surrogatepass")
    return Mutant(index=index, seed=name, mutations=tuple(applied), data=data)
