"""`file_input` offsets: a modification-time mark plus the files near it, never the history."""

from __future__ import annotations

import random

import pytest

from spindle.runtime.file_offsets import FileOffset, between, plan


def test_each_file_is_ingested_once_and_the_offset_stays_small() -> None:
    offset, listing, ingested = FileOffset.parse(None), [], []
    for step in range(500):
        listing.append((f"f{step:04d}", 1000 * step))
        files, offset = plan(offset, listing, window=2500, limit=None)
        ingested += files
    assert ingested == [p for p, _ in listing]
    assert offset.mark == 499_000
    assert sorted(offset.seen) == ["f0497", "f0498", "f0499"]  # within 2.5 s of the mark


def test_order_is_modification_time_then_path_and_the_limit_holds() -> None:
    listing = [("b", 5), ("a", 5), ("z", 1), ("c", 9)]
    files, offset = plan(FileOffset.parse(None), listing, window=0, limit=2)
    assert files == ["z", "a"]
    files, offset = plan(offset, listing, window=0, limit=2)
    assert files == ["b", "c"]
    assert plan(offset, listing, window=0, limit=2)[0] == []


def test_a_file_dated_ahead_of_the_clock_does_not_skip_the_files_written_until_then() -> None:
    """One file dated a day ahead (a skewed writer, `touch`) moved the mark there, and every
    file written during that day was older than the floor: skipped without a word. The mark
    moves no further than the listing's time; the file dated ahead is taken once."""
    day, window, now = 86_400_000, 60_000, 1_000_000_000
    listing = [("ahead", now + day), ("a", now - 10)]
    files, offset = plan(FileOffset.parse(None), listing, window=window, limit=None, now=now)
    assert files == ["a", "ahead"]
    assert offset.mark == now and "ahead" in offset.seen
    for minute in range(1, 4):  # files written in the hours after it are each taken once
        now += 60 * minute * 60_000
        listing.append((f"later{minute}", now - 5))
        files, offset = plan(offset, listing, window=window, limit=None, now=now)
        assert files == [f"later{minute}"]
    stored = FileOffset.parse(offset.to_json())
    assert plan(stored, listing, window=window, limit=None, now=now + 2 * day)[0] == []


def test_a_late_file_within_the_window_is_ingested_one_beyond_it_is_skipped() -> None:
    listing = [("new", 10_000)]
    _, offset = plan(FileOffset.parse(None), listing, window=3000, limit=None)
    listing += [("slow-upload", 8_000), ("ancient", 1_000)]
    files, offset = plan(offset, listing, window=3000, limit=None)
    assert files == ["slow-upload"]
    assert plan(offset, listing, window=3000, limit=None)[0] == []


def test_a_file_at_the_mark_that_arrives_later_is_not_lost_with_no_window() -> None:
    listing = [("b", 7)]
    _, offset = plan(FileOffset.parse(None), listing, window=0, limit=None)
    listing.append(("a", 7))  # same modification time, earlier name, listed later
    assert plan(offset, listing, window=0, limit=None)[0] == ["a"]


def test_replay_returns_exactly_what_each_step_planned() -> None:
    rng = random.Random(7)
    listing: list[tuple[str, int]] = []
    offset = FileOffset.parse(None)
    for step in range(200):
        for i in range(rng.randint(0, 4)):
            listing.append((f"s{step}-{i}", max(0, step * 100 + rng.randint(-250, 50))))
        files, after = plan(offset, listing, window=300, limit=rng.choice([None, 1, 2, 3]))
        round_tripped = FileOffset.parse(after.to_json())
        assert between(offset, round_tripped, listing, window=300) == files
        offset = round_tripped


def test_a_legacy_list_offset_reads_as_the_files_seen_and_then_gets_a_mark() -> None:
    legacy = ["a", "b"]
    listing = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    offset = FileOffset.parse(legacy)
    assert offset == FileOffset.parse({"mark": None, "seen": legacy})
    files, after = plan(offset, listing, window=0, limit=1)
    assert files == ["c"]
    assert after.to_json() == {"mark": 3, "seen": ["c"], "floor": 3}
    assert between(offset, after, listing, window=0) == ["c"]
    assert plan(after, listing, window=0, limit=None)[0] == ["d"]


def test_a_wider_window_never_makes_an_ingested_file_new_again() -> None:
    """Raising late_arrival_seconds (a knob that changes no plan) re-ingested every file between
    the old window and the new one: their rows twice in the table and every view over it."""
    listing = [("a", 0), ("b", 3_600_000)]
    files, offset = plan(FileOffset.parse(None), listing, window=60_000, limit=None)
    assert files == ["a", "b"] and offset.seen == {"b"}
    stored = FileOffset.parse(offset.to_json())
    assert plan(stored, listing, window=86_400_000, limit=None)[0] == []
    listing.append(("late", 3_000_000))  # later than the old window allowed: still skipped
    assert plan(stored, listing, window=86_400_000, limit=None)[0] == []
    listing.append(("c", 7_200_000))  # the floor stays until the wider window passes it
    files, offset = plan(stored, listing, window=86_400_000, limit=None)
    assert files == ["c"] and offset.floor == 3_540_000
    listing.append(("slow", 3_700_000))
    assert plan(offset, listing, window=86_400_000, limit=None)[0] == ["slow"]


def test_an_offset_stored_before_the_floor_reads_its_floor_from_the_window() -> None:
    stored = FileOffset.parse({"mark": 10_000, "seen": ["x"]})
    listing = [("x", 10_000), ("late", 8_000), ("old", 1_000)]
    assert plan(stored, listing, window=3_000, limit=None)[0] == ["late"]


@pytest.mark.parametrize("factor", [0.5, 1, 2])
def test_a_replay_takes_what_the_step_took_whatever_the_window_is_now(factor: float) -> None:
    """A knob change takes effect when the driver next starts, which is when a crashed step is
    replayed: under a narrower window the replay left out late files the step had taken, and
    committed an offset that marked them ingested."""
    rng = random.Random(11)
    listing: list[tuple[str, int]] = []
    offset = FileOffset.parse(None)
    for step in range(300):
        for i in range(rng.randint(0, 4)):
            listing.append((f"s{step}-{i}", max(0, step * 100 + rng.randint(-250, 50))))
        files, after = plan(offset, listing, window=300, limit=rng.choice([None, 1, 2]))
        stored = FileOffset.parse(after.to_json())
        replayed = between(offset, stored, listing, window=int(300 * factor))
        assert replayed == files
        offset = stored
