"""Fingerprints stay the same across parser upgrades (Feldera's #6090 / Caveat 1).

A statement's fingerprint decides whether it is modified, and the change id an approval names.
If a sqlglot upgrade normalized a statement differently, every pipeline would look modified after
the upgrade and be bootstrapped for nothing, and approvals computed with the other version would
not match. So the fingerprint and the normalized text of every statement of the corpus
(tests/golden/fingerprints, 200+ programs) are recorded, and any change fails here.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.unit import fingerprint_corpus as corpus

WHAT_TO_DO = """\
The parser now fingerprints {count} recorded statement(s) differently (recorded with sqlglot
{recorded}, parser {parser}). After this upgrade, unchanged pipelines would be reported modified
and bootstrapped for nothing, and approvals computed with the other version would not match.
Either
  * add a fingerprint migration keyed by parser version (spindle.versions.PARSER_VERSION), so
    text the old parser recorded fingerprints as before (and bump PARSER_VERSION), or
  * prove that the change is semantic (the statements really mean something else now): add a
    golden plan case showing it, then re-record with
    `python -m tests.unit.fingerprint_corpus record` and say so in the commit.
The differences:
{differences}"""


@pytest.fixture(scope="module")
def expected() -> dict[str, object]:
    recorded: dict[str, object] = json.loads(corpus.EXPECTED.read_text())
    return recorded


def test_the_corpus_covers_every_statement_form() -> None:
    programs = corpus.programs()
    assert len(programs) >= 200
    text = "\n".join(programs.values()).lower()
    for form in (
        r"\bjoin\b",
        r"\bleft join\b",
        r"\bwith \w+ as \(",
        r"\bover \(",
        r"\bcreate function\b",
        r"\blateness\b",
        r"'connectors'",
        r"\bmaterialized view\b",
        r"\bunion all\b",
        r"\bprimary key\b",
    ):
        assert re.search(form, text), form
    generated = {f"tests/golden/fingerprints/programs/{name}.sql" for name in corpus.generated()}
    assert generated <= set(programs)  # every generated program is committed


def test_every_program_of_the_corpus_is_recorded(expected: dict[str, object]) -> None:
    assert set(expected["programs"]) == set(corpus.programs())  # type: ignore[call-overload]


def test_fingerprints_and_normalized_text_are_unchanged(expected: dict[str, object]) -> None:
    found = corpus.differences(expected)
    assert not found, WHAT_TO_DO.format(
        count=len(found),
        recorded=expected["sqlglot"],
        parser=expected["parser_version"],
        differences="\n".join(found[:20]),
    )
