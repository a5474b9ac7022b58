"""Fuzz N mutants with a seed and tally the outcomes: what `make fuzz` and the CI test run."""

from __future__ import annotations

import resource
import time
from collections import Counter
from dataclasses import dataclass, field

from tests.fuzz.mutations import Mutant, mutant
from tests.fuzz.outcomes import Outcome, run

TIME_LIMIT = 10.0
"""Seconds one input may take (the documented bound; the size limit keeps inputs under it)."""


@dataclass
class Tally:
    count: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    mutations: Counter[str] = field(default_factory=Counter)
    violations: list[tuple[Mutant, Outcome]] = field(default_factory=list)
    slowest: tuple[float, Mutant | None] = (0.0, None)
    seconds: float = 0.0
    peak_rss_mb: float = 0.0

    def add(self, case: Mutant, outcome: Outcome) -> None:
        self.count += 1
        self.outcomes[outcome.kind] += 1
        self.mutations.update(case.mutations)
        if outcome.violation is not None or outcome.seconds > TIME_LIMIT:
            self.violations.append((case, outcome))
        if outcome.seconds > self.slowest[0]:
            self.slowest = (outcome.seconds, case)

    @property
    def internal_errors(self) -> int:
        return sum(n for kind, n in self.outcomes.items() if kind.startswith("internal:"))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def fuzz(*, count: int, seed: int, start: int = 0) -> Tally:
    tally = Tally()
    began = time.perf_counter()
    for index in range(start, start + count):
        case = mutant(index, seed=seed)
        tally.add(case, run(case))
    tally.seconds = time.perf_counter() - began
    tally.peak_rss_mb = peak_rss_mb()
    return tally


def describe(case: Mutant) -> str:
    return f"#{case.index} ({case.seed}; {', '.join(case.mutations)}; {len(case.data):,} " + (
        "bytes)" if isinstance(case.data, bytes) else "characters)"
    )


def report(tally: Tally, *, seed: int) -> str:
    lines = [
        f"fuzzed {tally.count:,} mutants (seed {seed}) in {tally.seconds:.1f} s",
        "outcomes:",
        *(f"  {kind:<22} {n:>6,}" for kind, n in tally.outcomes.most_common()),
        f"internal errors: {tally.internal_errors}",
        f"contract violations: {len(tally.violations)}",
    ]
    seconds, slowest = tally.slowest
    if slowest is not None:
        lines.append(f"slowest input: {seconds:.2f} s, {describe(slowest)}")
    lines.append(f"peak memory (max RSS of the process): {tally.peak_rss_mb:,.0f} MiB")
    for case, outcome in tally.violations[:20]:
        lines.append(f"VIOLATION {describe(case)}: {outcome.violation or 'too slow'}")
        lines.append(
            f"  reproduce: python -m tests.fuzz --seed {seed} --start {case.index} --count 1"
        )
    return "\n".join(lines)
