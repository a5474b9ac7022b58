"""`python -m tests.fuzz [--count N] [--seed S] [--start I]`: fuzz and print the tally; exit
status 1 when any outcome breaks the contract."""

from __future__ import annotations

import argparse
import sys

from tests.fuzz.run import fuzz, report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--count", type=int, default=1000, help="mutants to run")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed")
    parser.add_argument("--start", type=int, default=0, help="first mutant number")
    args = parser.parse_args()
    tally = fuzz(count=args.count, seed=args.seed, start=args.start)
    print(report(tally, seed=args.seed))
    return 1 if tally.violations else 0


if __name__ == "__main__":
    sys.exit(main())
