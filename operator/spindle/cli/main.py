"""The `spindle` command: a thin argparse front over the library; no traceback ever escapes.

A local command goes to the home's warm Spark server first (`cli.warm_client`); the library
is imported only when the command runs in this process.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # neither `typing` nor argparse loads before a command runs here
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any


def _parse_file(path: str, text: str, *, new: bool = False) -> object:
    """The program in `path`; the `new` one (what would run) also without a problem its
    connectors would meet at run time."""
    from spindle.cli import files
    from spindle.errors import SpindleError
    from spindle.program import parse_program

    try:
        program = parse_program(text)
        if new:
            program.refuse_unrunnable()
            if not program.tables and not program.views:  # as the operator refuses spec.sql
                raise SpindleError(
                    reason="InvalidProgram",
                    message="It declares no table and no view, so the diff would remove them "
                    "all: give the new program its CREATE TABLE and CREATE VIEW statements.",
                )
        return program
    except SpindleError as error:
        raise files.in_file(error, path) from None


def cmd_diff(args: argparse.Namespace) -> int:
    from spindle.cli import analysis, files, render
    from spindle.plan import make_plan

    texts = files.read_program(args.old), files.read_program(args.new)
    analysis.prime(texts, workers=analysis.worker_count())
    old = _parse_file(args.old, texts[0])
    new = _parse_file(args.new, texts[1], new=True)
    plan = make_plan(old=old, new=new)  # type: ignore[arg-type]
    if args.json:
        estimate = plan.estimate.to_json() if plan.estimate else None
        warnings = list(plan.new.warnings)
        render.print_json({**plan.to_json(), "estimate": estimate, "warnings": warnings})
    else:
        render.print_plan(plan)
    return 0


def build_parser(*, extensions: bool = True) -> argparse.ArgumentParser:
    """The command line; without `extensions`, only `diff` (which needs no storage, Spark or
    Kubernetes modules, so it starts in a fraction of the time)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="spindle", description="Evolve Spark SQL pipelines without re-ingesting history."
    )
    from spindle import __version__

    parser.add_argument("--version", action="version", version=f"spindle {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    diff = sub.add_parser("diff", help="compare two program files (no storage needed)")
    diff.add_argument("old", help="the old program (.sql)")
    diff.add_argument("new", help="the new program (.sql)")
    diff.add_argument("--json", action="store_true", help="print one JSON object")
    diff.set_defaults(run=cmd_diff)
    for register in _extensions() if extensions else ():
        register(sub)
    own_usage(parser)
    return parser


def parsed(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`argv` read by `parser` (its commands' parsers marked by `own_usage`): an unknown
    argument is an error of the command it was given to, shown with that command's usage."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "usage_of", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def own_usage(parser: argparse.ArgumentParser) -> None:
    """Each command's parser, as the one whose usage an error of its arguments shows
    (`usage_of`): argparse reports an unknown flag of `spindle local run` with the usage of
    `spindle` itself."""
    import argparse

    parser.set_defaults(usage_of=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                own_usage(command)


def _extensions() -> list[Callable[[Any], None]]:
    from spindle.cli import checkpoints, driver, local, plan, serve

    return [checkpoints.register, local.register, driver.register, serve.register, plan.register]


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command line: on the home's warm server when it is a local command that can
    use one, else in this process."""
    from spindle.cli.warm_client import route

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            code = route(argv)
            return run_here(argv) if code is None else code
        finally:
            if sys.stdout is not None:  # a reader that left shows here, not at the exit
                sys.stdout.flush()
    except BrokenPipeError:
        return reader_gone()
    except KeyboardInterrupt:  # before a command ran (its own ends as 130 too): no traceback
        return 130


SIGPIPE_EXIT = 128 + 13
"""The status a shell reports for a writer that SIGPIPE ended: what `cmd | head` leaves."""


def reader_gone() -> int:
    """Standard output's reader left (`spindle ... | head -1`): leave quietly, as other Unix
    tools do, with `SIGPIPE_EXIT`. Standard output becomes /dev/null, so what is still
    buffered fails neither now nor as the interpreter exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a file (a test's capture): nothing to redirect
        pass
    return SIGPIPE_EXIT


_PARSERS: dict[bool, argparse.ArgumentParser] = {}


def run_here(argv: Sequence[str]) -> int:
    """Run a command line in this process."""
    from spindle.cli import render
    from spindle.errors import SpindleError, internal

    argv = list(argv)
    extensions = argv[:1] != ["diff"]
    if extensions not in _PARSERS:  # a warm server parses many command lines
        _PARSERS[extensions] = build_parser(extensions=extensions)
    args = parsed(_PARSERS[extensions], argv)
    as_json = bool(getattr(args, "json", False))
    try:
        code: int = args.run(args)
        return code
    except SpindleError as error:
        render.print_error(error, as_json=as_json)
        if hasattr(args, "on_error"):
            args.on_error(error)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader of standard output left: `main` leaves quietly
        raise
    except Exception as error:  # the last line of defence: a clear body, never a traceback
        if os.environ.get("SPINDLE_DEBUG"):
            raise
        failed = internal(error)  # or one of the machine's: a user's to fix (exit 1)
        render.print_error(failed, as_json=as_json)
        return 2 if failed.reason == "InternalError" else 1


if __name__ == "__main__":
    sys.exit(main())
