"""CI's fuzz run: 1,000 mutants with a fixed seed, every outcome a plan or a located user error,
none slower than 10 s, and the run within 1 GiB. `make fuzz N=...` runs any number."""

from __future__ import annotations

import pytest

from tests.fuzz.mutations import MUTATIONS
from tests.fuzz.outcomes import PLAN
from tests.fuzz.run import Tally, describe, fuzz, peak_rss_mb

SEED = 15
COUNT = 1000
MEMORY_LIMIT_MB = 1024


@pytest.fixture(scope="module")
def tally() -> tuple[Tally, float]:
    before = peak_rss_mb()
    return fuzz(count=COUNT, seed=SEED), before


def test_every_outcome_is_a_plan_or_a_located_user_error(tally: tuple[Tally, float]) -> None:
    found, _ = tally
    assert found.count == COUNT
    assert not found.violations, "\n".join(
        f"{describe(case)}: {outcome.violation or f'{outcome.seconds:.1f} s'} "
        f"(python -m tests.fuzz --seed {SEED} --start {case.index} --count 1)"
        for case, outcome in found.violations
    )


def test_the_run_reaches_every_mutation_and_both_outcomes(tally: tuple[Tally, float]) -> None:
    found, _ = tally
    assert set(found.mutations) == set(MUTATIONS)
    assert found.outcomes[PLAN] >= COUNT // 20  # mutants that stay valid are still planned
    assert len(found.outcomes) >= 8  # and the rejected ones have their own reasons


def test_no_input_needs_a_gibibyte(tally: tuple[Tally, float]) -> None:
    found, before = tally
    assert found.peak_rss_mb - before < MEMORY_LIMIT_MB


@pytest.mark.parametrize(("seed", "index"), [(7, 4226), (11, 1758), (11, 2694)])
def test_mutants_that_once_raised_end_in_a_reason(seed: int, index: int) -> None:
    """A function whose RETURNS had no type (its position read from None), and a declared type
    that parses as a CAST (`DataType.build` raised TypeError), were internal errors."""
    found = fuzz(count=1, seed=seed, start=index)
    assert not found.violations, [outcome.violation for _, outcome in found.violations]
