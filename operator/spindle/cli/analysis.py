"""Analyze the statements of a large program in parallel processes, ahead of `parse_program`.

A statement's analysis is a pure function of its text, and its facts hold no ASTs, so the
uncached statements of a program can be shared out among forked workers and their facts sent
back to seed the cache that `parse_program` reads. Only the CLI does this: it runs one thread, so
forking is safe. The operator runs handlers in threads and analyzes serially; its cache stays warm
between reconciles anyway.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from spindle.program import facts, statements

MIN_STATEMENTS = 256
"""Below this, forking costs more than it saves."""


def _worker() -> None:
    """A worker's start: no collector (see `prime`), and Ctrl-C is the parent's
    to handle (each worker printed a `KeyboardInterrupt` traceback)."""
    gc.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_count() -> int:
    """`SPINDLE_WORKERS`, or the CPUs this process may run on."""
    configured = os.environ.get("SPINDLE_WORKERS", "").strip()
    if configured.isdigit():
        return max(int(configured), 1)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def prime(programs: Iterable[str], *, workers: int) -> int:
    """Analyze the programs' uncached statements in `workers` processes; returns how many were
    analyzed that way. Statements with problems are left for `parse_program` to report."""
    pending = list(
        dict.fromkeys(
            statement.text
            for program in programs
            for statement in statements.split(program)
            if not facts.known(statement.text)
        )
    )
    if workers < 2 or len(pending) < MIN_STATEMENTS:
        return 0
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    size = -(-len(pending) // workers)
    chunks = [pending[i : i + size] for i in range(0, len(pending), size)]
    context = multiprocessing.get_context("fork")
    # Workers then share the parent's objects instead of copying the pages the GC touches. They
    # stay frozen: a CLI process is short-lived, and collecting them costs more than it frees.
    gc.freeze()
    try:
        with ProcessPoolExecutor(
            max_workers=len(chunks), mp_context=context, initializer=_worker
        ) as pool:
            results = pool.map(facts.analyze_texts, chunks)
            for chunk, analyzed in zip(chunks, results, strict=True):
                for text, found in zip(chunk, analyzed, strict=True):
                    if not isinstance(found, Exception):
                        facts.remember(text, found)
    except (OSError, BrokenProcessPool):  # no processes to be had: analyze serially instead
        return 0
    return len(pending)
