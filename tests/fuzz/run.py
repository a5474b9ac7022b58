"""Fuzz N mutants with a seed and tally the outcomes: what `make fuzz` and the CI tests run.

Programs go through the program layer in process (`fuzz`); manifests go through the CLI's two
commands that read one, `spindle local apply -f` and `spindle plan -f`, in process too
(`fuzz_manifests`). One tally shape serves both."""

from __future__ import annotations

import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.manifests import ManifestMutant, manifest_mutant
from tests.fuzz.mutations import Mutant, mutant
from tests.fuzz.outcomes import Outcome, cli, run

Case = Mutant | ManifestMutant

TIME_LIMIT = 10.0
"""Seconds one input may take (the documented bound; the size limit keeps inputs under it)."""


@dataclass
class Tally:
    count: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    mutations: Counter[str] = field(default_factory=Counter)
    violations: list[tuple[Case, Outcome]] = field(default_factory=list)
    slowest: tuple[float, Case | None] = (0.0, None)
    seconds: float = 0.0
    peak_rss_mb: float = 0.0

    def add(self, case: Case, outcome: Outcome, *, label: str = "") -> None:
        self.count += 1
        self.outcomes[label + outcome.kind] += 1
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


def fuzz_manifests(*, count: int, seed: int, base: dict[str, Any], work: Path) -> Tally:
    """`count` manifest mutants, each written to a file under `work` and given to `spindle
    local apply -f` (a home under `work`) and `spindle plan -f`: two outcomes per mutant."""
    tally = Tally()
    began = time.perf_counter()
    for index in range(count):
        case = manifest_mutant(index, seed=seed, base=base)
        path = work / f"{case.name}.yaml"
        path.write_text(case.text, encoding="utf-8", errors="surrogatepass")
        home = str(work / "home")
        tally.add(case, cli(["local", "apply", "--home", home, "--json", "-f", str(path)]))
        tally.add(case, cli(["plan", "--json", "-f", str(path)]), label="plan: ")
    tally.seconds = time.perf_counter() - began
    tally.peak_rss_mb = peak_rss_mb()
    return tally


def describe(case: Case) -> str:
    if isinstance(case, ManifestMutant):
        return (
            f"manifest #{case.index} ({', '.join(case.mutations)}; {len(case.text):,} characters)"
        )
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
        if isinstance(case, ManifestMutant):
            lines.append(f"  reproduce: manifest_mutant({case.index}, seed={seed}, base=...)")
        else:
            lines.append(
                f"  reproduce: python -m tests.fuzz --seed {seed} --start {case.index} --count 1"
            )
    return "\n".join(lines)
