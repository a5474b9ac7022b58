"""The brain's memo: bounded by the texts it keeps, and still of use to a fleet larger than it."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.lifecycle.memo import memoized


def counting(budget: int) -> tuple[list[str], Any]:
    calls: list[str] = []

    @memoized(budget=budget)
    def parse(text: str, *, flag: bool = False) -> str:
        calls.append(text)
        if text == "bad":
            raise ValueError(text)
        return text.upper() + ("!" if flag else "")

    return calls, parse


def test_a_fleet_that_fits_is_computed_once() -> None:
    calls, parse = counting(budget=10 * 100)
    fleet = [f"p{i:09d}" for i in range(100)]  # 10 characters each
    for _ in range(3):
        assert [parse(t) for t in fleet] == [t.upper() for t in fleet]
    assert calls == fleet


def test_a_fleet_larger_than_the_memo_still_finds_part_of_it() -> None:
    """An lru_cache of 50 entries, in a cycle over 100, finds none of them: each is evicted
    just before it is wanted again."""
    calls, parse = counting(budget=10 * 50)
    fleet = [f"p{i:09d}" for i in range(100)]
    for t in fleet:
        parse(t)
    calls.clear()
    for _ in range(4):
        for t in fleet:
            parse(t)
    assert 0.15 < 1 - len(calls) / 400 < 0.85  # about half hit


def test_the_texts_kept_stay_within_the_budget() -> None:
    calls, parse = counting(budget=25)
    for text in ("a" * 10, "b" * 10, "c" * 10):
        parse(text)
        assert parse.held() <= 25
    assert parse.held() == 20
    parse("d" * 30)  # over the budget: computed, not kept
    parse("d" * 30)
    assert calls[-2:] == ["d" * 30, "d" * 30] and parse.held() == 20


def test_arguments_by_keyword_are_part_of_the_key_and_errors_are_not_kept() -> None:
    calls, parse = counting(budget=100)
    assert parse("x") == "X" and parse("x", flag=True) == "X!"
    for _ in range(2):
        with pytest.raises(ValueError):
            parse("bad")
    assert calls == ["x", "x", "bad", "bad"]


def test_the_largest_pipeline_keeps_both_its_programs_and_its_plan() -> None:
    """A pipeline whose program and checkpoint's are as large as a program may be, with a
    change pending: each decision reads both. A memo that kept only one of them parsed a
    program of several MB at every decision of that pipeline."""
    from spindle.lifecycle.memo import text_length
    from spindle.lifecycle.rules import MEMO_TEXT
    from spindle.program.limits import MAX_PROGRAM_BYTES

    largest = "x" * MAX_PROGRAM_BYTES
    assert text_length(largest) + text_length(largest) <= MEMO_TEXT  # both parsed programs
    assert text_length(largest, largest) <= MEMO_TEXT  # the plan made of them
    calls, parse = counting(budget=20)
    for _ in range(3):
        parse("a" * 10)
        parse("b" * 10)
    assert calls == ["a" * 10, "b" * 10]
