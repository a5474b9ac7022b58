"""A memo for the brain's pure functions of program texts, bounded by the texts it keeps.

An operator decides on every pipeline of its fleet in turn, at each approval, resync and pod
event, and each decision parses the pipeline's program and plans it against its checkpoint's.
Both are pure functions of the texts, so they are memoized. A memo bounded by a count of
entries (`functools.lru_cache`) misses every time once the fleet is larger than the count: in
a cycle over the fleet, the least recently used entry is always the next one wanted. 500
pipelines with an `lru_cache` of 256 programs parsed both of every pipeline's programs again at
every decision (5 ms of CPU each, against 0.1 ms from the memo), and past 512 pipelines planned
them again too.

So the bound is the total length of the texts an entry was made from (what a parsed program's
size follows), and a full memo evicts an entry at random: a fleet that fits is kept whole, and
one that does not still finds the share of it that fits, where LRU would find none.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable, Hashable
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


def text_length(*args: Any, **kwargs: Any) -> int:
    """The total length of the string arguments: an entry's weight."""
    return max(1, sum(len(a) for a in (*args, *kwargs.values()) if isinstance(a, str)))


def memoized(*, budget: int) -> Callable[[Callable[_P, _T]], Callable[_P, _T]]:
    """Memoize a pure function of hashable arguments, keeping entries whose `text_length` sums
    to at most `budget`. Exceptions are not memoized (as with `functools.lru_cache`)."""

    def wrap(function: Callable[_P, _T]) -> Callable[_P, _T]:
        entries: dict[Hashable, tuple[int, _T]] = {}
        held = 0
        lock = threading.Lock()
        chance = random.Random(0)

        @functools.wraps(function)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            nonlocal held
            key = (args, tuple(sorted(kwargs.items())))
            with lock:
                found = entries.get(key)
            if found is not None:
                return found[1]
            value = function(*args, **kwargs)
            weight = text_length(*args, **kwargs)
            with lock:
                if key not in entries and weight <= budget:
                    if held + weight > budget:
                        for gone in chance.sample(list(entries), len(entries)):
                            held -= entries.pop(gone)[0]
                            if held + weight <= budget:
                                break
                    entries[key] = (weight, value)
                    held += weight
            return value

        call.held = lambda: held  # type: ignore[attr-defined]  # the weight kept, for tests
        return call

    return wrap
