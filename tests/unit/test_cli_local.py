"""`spindle local ...` and `spindle query` command lines a user gets wrong, and output read by a
pipe that closes early: usage errors (exit 2), user errors with a reason (exit 1), a quiet exit
for a reader that left (`| head`), never a traceback."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.cli import warm_client
from spindle.cli.main import SIGPIPE_EXIT, build_parser, main
from spindle.local.home import LocalPipeline
from tests.unit.test_lifecycle import V1
from tests.unit.test_local_home import manifest

MANIFEST = "examples/grades/pipeline-v1.yaml"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with the pipeline `grades` applied (no run, no checkpoint)."""
    LocalPipeline(tmp_path / "home", "grades").save(manifest(V1))
    return tmp_path / "home"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local commands go through `warm_client.route`, as outside the tests; starting a server
    (Spark) fails the test."""
    monkeypatch.delenv("SPINDLE_NO_SERVER", raising=False)

    def no_start(*_: object, **__: object) -> None:
        raise AssertionError("a Spark server was started")

    monkeypatch.setattr(warm_client, "start", no_start)


class FakeConnection:
    """A greeted connection to a server that answers with `frames`; records what is sent."""

    pid = 0

    def __init__(self, frames: list[dict[str, Any]], busy: list[str] | None = None) -> None:
        from spindle.local.warm import version

        self.busy, self.version = busy, version()
        self.frames: Iterator[dict[str, Any]] = iter(frames)
        self.sent: list[dict[str, Any]] = []
        self.closed = False

    def send(self, frame: dict[str, Any]) -> None:
        self.sent.append(frame)

    def receive(self) -> dict[str, Any] | None:
        return next(self.frames, None)

    def close(self) -> None:
        self.closed = True


class ClosedPipe(io.TextIOBase):
    """Standard output whose reader left: every write fails as a closed pipe's does."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


# -- a reader that leaves (`spindle ... | head -1`) -------------------------------------------


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_reader_that_left_ends_a_command_run_here_quietly(
    home: Path, json_flag: list[str]
) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader left before the command wrote anything
    argv = ["local", "status", "grades", "--home", str(home), "--no-server", *json_flag]
    with subprocess.Popen(
        [sys.executable, "-m", "spindle.cli.main", *argv],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        os.close(write)
        _, err = process.communicate(timeout=120)
    assert err == ""  # no traceback, no "Exception ignored", no InternalError
    assert process.returncode == SIGPIPE_EXIT == 141


def test_a_reader_that_left_ends_a_served_command_quietly(
    home: Path,
    served: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    connection = FakeConnection([{"out": "Pipeline grades: phase Stopped\n"}, {"exit": 0}])
    monkeypatch.setattr(warm_client, "connect", lambda *_, **__: connection)
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["local", "status", "grades", "--home", str(home)]) == SIGPIPE_EXIT
    assert capsys.readouterr().err == ""
    assert connection.closed  # the server sees the client leave (a run stops after its step)
    assert connection.sent[0]["op"] == "run"


# -- --idle-timeout -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "-5", "0", "nan", "inf", ""])
@pytest.mark.parametrize(
    "command", [["local", "status", "grades"], ["query", "grades", "select 1"]]
)
def test_an_idle_timeout_that_is_not_seconds_above_zero_is_a_usage_error(
    command: list[str],
    value: str,
    home: Path,
    served: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def no_server(*_: object, **__: object) -> None:
        raise AssertionError("a refused command line reached a server")

    monkeypatch.setattr(warm_client, "connect", no_server)
    with pytest.raises(SystemExit) as exit:
        main([*command, "--home", str(home), "--idle-timeout", value])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: spindle ")
    expected = "argument --idle-timeout: expected a number of seconds greater than 0, e.g. 600 "
    assert f"{expected}(got {value!r})" in err
    assert "Traceback" not in err and "ValueError" not in err


def test_a_valid_idle_timeout_reaches_the_server(
    home: Path, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = FakeConnection([{"exit": 0}])
    monkeypatch.setattr(warm_client, "connect", lambda *_, **__: connection)
    assert main(["local", "status", "grades", "--home", str(home), "--idle-timeout", "0.5"]) == 0
    assert connection.sent[0]["idle_timeout"] == 0.5
    assert warm_client.idle_timeout("600") == 600.0


@pytest.mark.parametrize(
    "given",
    [
        ["--home", "first", "--home", "second"],
        ["--home=first", "--home", "second"],
        ["--home", "first", "--home=second"],
    ],
)
def test_a_home_given_twice_is_the_last_for_the_server_as_for_the_command(
    given: list[str], tmp_path: Path, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Routing took the first `--home`, argparse the last: the command ran on the first home's
    server, on the second home's files."""
    monkeypatch.chdir(tmp_path)
    homes: list[str] = []

    def connect(files: Any, **_: Any) -> FakeConnection:
        homes.append(files.home)
        return FakeConnection([{"exit": 0}])

    monkeypatch.setattr(warm_client, "connect", connect)
    argv = ["local", "status", "grades", *given]
    assert warm_client.home_of(argv) == str(tmp_path / "second")
    assert warm_client.route(argv) == 0 and homes == [str(tmp_path / "second")]
    assert build_parser().parse_args(argv).home == "second"


def test_server_status_shows_its_command_as_it_was_typed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`now:` joined the words with spaces: `--home sp ace home` for `--home 'sp ace home'`."""
    from spindle.cli import server_commands

    command = ["local", "run", "grades", "--until-idle", "--home", "sp ace home"]
    status = {
        "running": True,
        "home": "/h",
        "pid": 7,
        "socket": "/h/server/spindle.sock",
        "version": "v",
        "uptimeSeconds": 3.0,
        "memoryBytes": 2**20,
        "idleTimeoutSeconds": 600.0,
        "command": command,
        "waiting": 0,
        "log": "/h/server/server.log",
    }
    monkeypatch.setattr(server_commands, "server_status", lambda _: status)
    assert main(["local", "server", "status", "--home", "/h"]) == 0
    out = capsys.readouterr().out
    assert "now: spindle local run grades --until-idle --home 'sp ace home'" in out


# -- a home that is not a directory ---------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["query", "grades", "select 1"],
        ["local", "apply", "-f", MANIFEST],
        ["local", "status", "grades"],
        ["local", "server", "status"],
    ],
)
@pytest.mark.parametrize("under", [False, True])
def test_a_home_that_is_not_a_directory_is_a_user_error(
    command: list[str],
    under: bool,
    tmp_path: Path,
    served: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    regular = tmp_path / "file"
    regular.write_text("not a home\n")
    home = regular / "home" if under else regular  # the home, or a parent of it, is a file
    assert main([*command, "--home", str(home), "--json"]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    body = json.loads(out.out)
    assert body["error_code"] == "InvalidHome"
    assert f"{regular} is not a directory" in body["message"] or (
        not under and "it is not a directory" in body["message"]
    )
    assert "Name a directory with --home" in body["message"]
    assert regular.read_text() == "not a home\n"


def test_a_home_that_cannot_be_written_is_a_user_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A directory the kernel refuses files in (even to root) was an InternalError, "This is
    a Spindle bug"."""
    home = "/proc/spindle-home"
    assert main(["local", "apply", "-f", MANIFEST, "--home", home, "--no-server", "--json"]) == 1
    out = capsys.readouterr()
    body = json.loads(out.out)
    assert body["error_code"] == "InvalidHome" and "Traceback" not in out.out + out.err
    assert body["message"].startswith(f"Spindle cannot write its local state to {home}/")
    assert "Name a directory you may write with --home" in body["message"]


def test_spindle_home_that_is_not_a_directory_is_a_user_error(
    tmp_path: Path,
    served: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    regular = tmp_path / "file"
    regular.write_text("")
    monkeypatch.setenv("SPINDLE_HOME", str(regular))
    assert main(["query", "grades", "select 1"]) == 1
    err = capsys.readouterr().err
    assert "error InvalidHome: The home" in err and "Traceback" not in err


# -- help ---------------------------------------------------------------------------------------


def _arguments(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if (*path, name) not in (("driver",), ("operator",)):  # started by the operator
                    yield from _arguments(child, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield " ".join(path) + " " + (action.option_strings or [action.dest])[-1], action


def test_every_argument_of_a_users_command_has_help() -> None:
    arguments = dict(_arguments(build_parser(), ()))
    assert {"local stop --force", "local status name", "checkpoints show id"} <= set(arguments)
    assert [name for name, action in arguments.items() if not action.help] == []


def test_only_commands_the_warm_server_may_run_list_its_options() -> None:
    """`local stop`, `restate` and `server ...` always run in their own process: their help
    listed `--no-server` and `--idle-timeout`, which do nothing there (still accepted)."""
    arguments = dict(_arguments(build_parser(), ()))
    listed = {
        name.rsplit(" ", 1)[0]
        for name, action in arguments.items()
        if name.endswith((" --no-server", " --idle-timeout")) and action.help != argparse.SUPPRESS
    }
    assert {"local status", "local run", "local apply", "query"} <= listed
    assert not listed & {"local stop", "local restate", "local server stop", "local server status"}


# -- a server busy with another command -----------------------------------------------------------


def test_a_command_without_spark_runs_here_while_the_server_is_busy(
    home: Path, served: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    running = ["local", "run", "grades", "--until-idle"]
    connection = FakeConnection([{"exit": 0}], busy=running)
    monkeypatch.setattr(warm_client, "connect", lambda *_, **__: connection)
    assert warm_client.route(["local", "status", "grades", "--home", str(home)]) is None
    assert connection.closed and connection.sent == []  # nothing waits for the run
    assert warm_client.route(["query", "grades", "select 1", "--home", str(home)]) == 0
    assert connection.sent[0]["argv"][0] == "query"  # Spark: it waits, and says so
    assert "waiting for the server, which runs `spindle local run grades" in capsys.readouterr().err


def test_a_command_without_spark_never_replaces_a_server_of_another_version(
    home: Path, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an upgrade (or with two installs sharing a home), `local status` replaced the
    older server, stopping another terminal's run after its step, and waited for it."""
    connection = FakeConnection([{"exit": 0}])
    connection.version = "0.0.1+older"
    asked: list[bool] = []

    def connect(*_: Any, replace: bool = True) -> FakeConnection | None:
        asked.append(replace)
        return connection

    monkeypatch.setattr(warm_client, "connect", connect)
    assert warm_client.route(["local", "status", "grades", "--home", str(home)]) is None
    assert asked == [False] and connection.closed and connection.sent == []


# -- exit statuses, the home, damaged local files, and a failure said once -----------------------

UNKNOWN_COLUMN = "View 'avg_grade_enriched' reads column 'nope'"


def _failing(tmp_path: Path) -> Path:
    """The grades manifest with a program the plan fails on (`UnknownColumn`)."""
    path = tmp_path / "failing.yaml"
    text = Path(MANIFEST).read_text()
    path.write_text(text.replace("name as student_name", "nope as student_name"))
    return path


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_local_apply_of_a_program_that_fails_exits_1_and_status_exits_0(
    json_flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `spindle plan -f` on the same file: a CI script notices. The manifest is recorded
    and its status printed all the same; `local status` of it is a query that succeeded."""
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    assert main(["local", "apply", "-f", str(_failing(tmp_path)), *home, *json_flag]) == 1
    out = capsys.readouterr().out
    if json_flag:
        body = json.loads(out)
        assert body["phase"] == "Failed" and body["conditions"][0]["reason"] == "UnknownColumn"
    else:
        assert "pipeline/grades applied (generation 1)" in out
        root = (tmp_path / "home" / "storage" / "default" / "grades").as_uri()
        assert f"  state and checkpoints: {root}\n" in out  # where runs here keep them
        assert "phase Failed" in out and f"UnknownColumn: {UNKNOWN_COLUMN}" in out
    assert main(["local", "status", "grades", *home, *json_flag]) == 0
    assert main(["plan", "-f", str(_failing(tmp_path))]) == 1
    assert main(["local", "apply", "-f", MANIFEST, *home, *json_flag]) == 0


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_local_apply_and_run_say_a_failure_once(
    json_flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The status printed (or the error) says it; no `Warning` line on standard error
    repeats it."""
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    assert main(["local", "apply", "-f", str(_failing(tmp_path)), *home, *json_flag]) == 1
    out, err = capsys.readouterr()
    assert out.count(UNKNOWN_COLUMN) == 1 and err == ""
    (tmp_path / "home" / "pipelines" / "grades" / "status.json").unlink()  # news again
    assert main(["local", "run", "grades", "--until-idle", *home]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count(UNKNOWN_COLUMN) == 1
    assert err.startswith(f"error UnknownColumn: {UNKNOWN_COLUMN}")


def test_local_status_says_a_failed_run_once(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = "A file of totals's stored state at state/views/totals@3 is missing"
    LocalPipeline(home, "grades").set_driver(
        mode="run", generation=1, phase="Failed", reason="StateFileMissing", message=message
    )
    assert main(["local", "status", "grades", "--home", str(home), "--no-server"]) == 0
    out, err = capsys.readouterr()
    assert "phase Failed" in out and out.count(f"StateFileMissing: {message}") == 1
    assert err == ""


def test_an_empty_spindle_home_is_the_default_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = Path(MANIFEST).resolve()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("SPINDLE_HOME", "")
    assert main(["local", "apply", "-f", str(manifest), "--no-server"]) == 0
    assert main(["local", "status", "grades", "--no-server"]) == 0
    assert "Pipeline grades: phase" in capsys.readouterr().out
    assert (tmp_path / "user" / ".spindle" / "pipelines" / "grades" / "pipeline.json").exists()
    assert not (tmp_path / "pipelines").exists()


@pytest.mark.parametrize(
    "command", [["local", "status", "grades"], ["query", "grades", "select 1"]]
)
def test_a_damaged_pipeline_record_is_a_user_error(
    command: list[str], home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / "pipelines" / "grades" / "pipeline.json"
    path.write_text(path.read_text()[:100])
    assert main([*command, "--home", str(home), "--no-server"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error LocalStateUnreadable: Cannot read {path}")
    assert "InternalError" not in err and "Traceback" not in err


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_restatement_before_the_first_checkpoint_is_refused_and_not_kept(
    home: Path, json_flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed a status without a word, exited 1, and kept the request: the first run's
    checkpoint then asked to approve restating a view the run had just computed."""
    args = ["--home", str(home), "--no-server", *json_flag]
    assert main(["local", "restate", "grades", "avg_grade", *args]) == 1
    out, err = capsys.readouterr()
    if json_flag:
        assert json.loads(out)["error_code"] == "NoCheckpoint"
    else:
        assert err.startswith("error NoCheckpoint: Pipeline grades has no checkpoint yet")
    assert "nothing is stored to recompute" in out + err
    assert LocalPipeline(home, "grades").restate is None


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["local", "run", "grades", "--untill-idle"], "usage: spindle local run "),
        (["diff", "--bogus", "a.sql", "b.sql"], "usage: spindle diff "),
        (["checkpoints", "list", "--x", "file:///tmp"], "usage: spindle checkpoints list "),
    ],
)
def test_an_unknown_flag_shows_the_usage_of_its_command(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It showed the usage of `spindle` itself, a list of commands, for a misspelt flag."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--no-server"] if argv[0] == "local" else argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith(usage) and "error: unrecognized arguments: --" in err


def test_an_unknown_flag_of_kubectl_spindle_shows_its_commands_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spindle.cli import kubectl_plugin

    with pytest.raises(SystemExit) as exited:
        kubectl_plugin.main(["status", "grades", "--jsn"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith("usage: kubectl spindle status ")
    assert "error: unrecognized arguments: --jsn" in err


def test_the_version_is_one_flag_away(capsys: pytest.CaptureFixture[str]) -> None:
    from spindle import __version__

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"spindle {__version__}\n"


def test_local_apply_says_when_runs_here_use_the_manifests_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manifest's `spec.storage` is where a local run reads and writes (the cluster's, for a
    production manifest): `local apply` says so, where the README said only `--home`."""
    document = yaml.safe_load(Path(MANIFEST).read_text())
    shared = (tmp_path / "shared").as_uri()
    document["spec"]["storage"] = {"uri": shared}
    path = tmp_path / "stored.yaml"
    path.write_text(yaml.safe_dump(document))
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    assert main(["local", "apply", "-f", str(path), *home]) == 0
    said = f"  state and checkpoints: {shared}/default/grades (spec.storage: runs here read and"
    assert said in capsys.readouterr().out


def test_a_ctrl_c_inside_a_spark_call_leaves_no_traceback() -> None:
    """py4j logs a Ctrl-C that reaches it mid-command with `logging.exception`: the root
    logger printed `ERROR:root:KeyboardInterrupt while sending command.` and a traceback."""
    import logging

    from spindle.runtime.session import _quiet_query_context

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("root", logging.ERROR, __file__, 1, message, None, None)

    _quiet_query_context()  # as a Spark session starts
    root = logging.getLogger()
    assert not root.filter(record("KeyboardInterrupt while sending command."))
    assert root.filter(record("Something else went wrong."))


def test_a_run_that_fails_on_a_spindle_bug_is_failed_in_the_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected error (a bug, here made to happen where Spark would start) ended the run
    with `InternalError`, but `local status` said `Stopped`/`NotRunning`, as after a clean
    stop. It says `Failed`, with the error."""
    from spindle.local import runner

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(runner, "open_runtime", broken)
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    assert main(["local", "apply", "-f", MANIFEST, *home]) == 0
    assert main(["local", "run", "grades", "--until-idle", *home]) == 2
    assert (
        "error InternalError: Unexpected RuntimeError: the engine broke." in capsys.readouterr().err
    )
    assert main(["local", "status", "grades", "--json", *home]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["phase"] == "Failed"
    assert status["conditions"][0]["reason"] == "InternalError"


def test_under_bootstrap_policy_reject_nothing_offers_or_takes_an_approval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`local status` said "Approve with change id" and `local approve` recorded it; the run
    then ended BootstrapRejected. Warnings of a program without a pending change are shown."""
    from spindle.checkpoint.store import open_store
    from tests.checkpoints import GRADES_V1, seed

    shared = tmp_path / "shared"
    root = open_store((shared / "default" / "grades").as_uri())
    seed(root, namespace="default", name="grades", program=GRADES_V1)
    document = yaml.safe_load(Path("examples/grades/pipeline-v2.yaml").read_text())
    document["spec"]["storage"] = {"uri": shared.as_uri()}
    document["spec"]["bootstrapPolicy"] = "reject"
    path = tmp_path / "v2.yaml"
    path.write_text(yaml.safe_dump(document))
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    main(["local", "apply", "-f", str(path), *home])
    out = " ".join(capsys.readouterr().out.split())
    assert "BootstrapRejected" in out and "Approve with change id" not in out
    assert "bootstrapPolicy is reject: change b77cf0f27757 will not run" in out
    assert main(["local", "approve", "grades", "b77cf0f27757", *home]) == 1
    assert capsys.readouterr().err.startswith("error BootstrapRejected: Pipeline 'grades' has")
    assert LocalPipeline(tmp_path / "home", "grades").approval is None

    document = yaml.safe_load(Path(MANIFEST).read_text())
    document["spec"]["sql"] = GRADES_V1.replace("'materialized' = 'true'", "'colour' = 'x'", 1)
    document["spec"]["storage"] = {"uri": (tmp_path / "other").as_uri()}
    path.write_text(yaml.safe_dump(document))
    main(["local", "apply", "-f", str(path), *home])
    capsys.readouterr()
    assert main(["local", "status", "grades", *home]) == 0
    assert "warning: 'students': Spindle does not read property 'colour'" in capsys.readouterr().out


REFUSED_OLD = """create table t (a int, b int);
create table u (a int) with ('materialized' = 'true');
create view v as select a from t;
create view w as select a from u;
"""
REFUSED_NEW = REFUSED_OLD.replace("select a from t", "select a + 1 as a from t")


def _applied(tmp_path: Path, sql: str, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], str]:
    """Pipeline `p` of `sql` applied under a home, its storage holding a checkpoint of
    REFUSED_OLD: the home arguments, and the pending change's id."""
    from spindle.checkpoint.store import open_store
    from tests.checkpoints import seed

    shared = tmp_path / "shared"
    root = open_store((shared / "default" / "p").as_uri())
    seed(root, namespace="default", name="p", program=REFUSED_OLD)
    document = {
        "apiVersion": "spindle.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "p"},
        "spec": {"sql": sql, "storage": {"uri": shared.as_uri()}},
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(document))
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    main(["local", "apply", "-f", str(path), *home])
    capsys.readouterr()
    assert main(["local", "status", "p", "--json", *home]) == 0
    return home, str(json.loads(capsys.readouterr().out)["pendingChange"]["id"])


def test_a_change_the_plan_refuses_is_not_approved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`local approve` said "Approved change ..." of a change refused at planning
    (TableNotMaterialized, phase Failed), which no run would ever bootstrap."""
    home, change = _applied(tmp_path, REFUSED_NEW, capsys)
    assert main(["local", "approve", "p", change, *home]) == 1
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert err.startswith(
        f"error NoPendingChange: Pipeline 'p' has no change awaiting approval: its phase is "
        f"Failed (TableNotMaterialized), and change {change} will not run, so an approval "
        "would not start it. Views that need bootstrapping read tables that are not "
        "materialized (t)"
    )
    assert "Nothing was approved; `spindle local status p` shows the change." in err
    assert "Approved" not in captured.out
    assert LocalPipeline(tmp_path / "home", "p").approval is None


def test_approving_a_change_again_is_no_error_and_another_id_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script that approves twice (a retried CI job) is told the change is approved already,
    exit 0; naming another change then is still refused."""
    approvable = REFUSED_OLD.replace("from u", "from u where a > 0")
    home, change = _applied(tmp_path, approvable, capsys)
    assert main(["local", "approve", "p", change, *home]) == 0
    assert f"Approved change {change}." in capsys.readouterr().out
    assert main(["local", "approve", "p", change, *home]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out == (
        f"Change {change} of pipeline 'p' is approved already (phase Stopped); nothing to do. "
        "`spindle local run p` bootstraps it."
    )
    assert main(["local", "status", "p", *home]) == 0  # it said "Approve with change id"
    out = " ".join(capsys.readouterr().out.split())
    assert f"Bootstrap: allowed, and change {change} is approved." in out
    assert "Approve with" not in out
    assert main(["local", "approve", "p", "0" * 12, *home]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error NoPendingChange: Pipeline 'p' has no change awaiting approval")
    assert LocalPipeline(tmp_path / "home", "p").approval == change


def test_a_home_that_cannot_hold_a_servers_files_runs_the_command_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A home where the server's files cannot be made (read-only, full; here `server` is a
    file) printed an `OSError` traceback for every command that needs Spark: it runs here
    instead, and says what it says there."""
    monkeypatch.delenv("SPINDLE_NO_SERVER", raising=False)
    home = tmp_path / "home"
    LocalPipeline(home, "grades").save(manifest(V1))
    (home / "server").write_text("not a directory\n")
    assert main(["query", "grades", "select 1", "--home", str(home), "--json"]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert json.loads(out.out)["error_code"] == "CheckpointNotFound"  # as without a server


@pytest.mark.parametrize(
    "argv",
    [
        ["local", "apply", "-f", "-"],
        ["local", "apply", "--file=-"],
        ["local", "apply", "-f-"],
        ["local", "apply", "-f", "/dev/stdin"],
        ["local", "apply", "--no-ser", "-f", "m.yaml"],  # argparse takes --no-server so
        ["query", "grades", "select 1", "--hom", "/elsewhere"],  # and --home so
        ["local", "status", "grades", "--he"],
    ],
)
def test_standard_input_and_abbreviated_options_keep_the_command_here(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a server running, `local apply --file=- < m.yaml` failed with "Cannot read -: it
    is empty" (the server read its own standard input), and `--hom X` went to the default
    home's server."""
    monkeypatch.delenv("SPINDLE_NO_SERVER", raising=False)
    assert warm_client._wanted(argv) == (False, False)
    assert warm_client._wanted(["local", "apply", "-f", "m.yaml"]) == (True, False)
    assert warm_client._wanted(["query", "grades", "-- a comment\nselect 1"]) == (True, True)


def test_ctrl_c_before_a_command_runs_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the command line was routed or parsed printed a traceback (exit -2)."""

    def interrupted(_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(warm_client, "route", interrupted)
    assert main(["local", "status", "grades"]) == 130
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


def test_local_status_shows_the_status_in_a_home_it_may_only_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`local status` wrote the status it showed to the home, and failed with `InvalidHome`
    where it could not (a read-only or full disk; here `status.json` is a directory)."""
    home = tmp_path / "home"
    LocalPipeline(home, "grades").save(manifest(V1))
    (home / "pipelines" / "grades" / "status.json").mkdir(parents=True)
    assert main(["local", "status", "grades", "--home", str(home), "--no-server"]) == 0
    out = capsys.readouterr()
    assert "grades" in out.out and "InvalidHome" not in out.out + out.err


def test_a_descriptor_of_this_process_keeps_the_command_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`-f <(envsubst < p.yaml)` passes `/dev/fd/63`, which the server opened as its own."""
    monkeypatch.delenv("SPINDLE_NO_SERVER", raising=False)
    for path in ("/dev/fd/63", "/proc/self/fd/7"):
        assert warm_client._wanted(["local", "apply", "-f", path]) == (False, False)
        assert warm_client._wanted(["local", "apply", f"--file={path}"]) == (False, False)


def test_an_apply_whose_status_cannot_be_observed_says_it_was_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With storage it cannot read (no credentials), `local apply` printed only the error,
    though the manifest was recorded: a user applied it again, or thought it lost."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "m.yaml"
    storage = {"uri": "s3://bucket/prefix", "endpoint": "http://127.0.0.1:9"}
    document = {
        "apiVersion": "spindle.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "g"},
        "spec": {"sql": "create table t (id int);", "storage": storage},
    }
    path.write_text(yaml.safe_dump(document))
    home = tmp_path / "home"
    assert main(["local", "apply", "-f", str(path), "--home", str(home), "--no-server"]) == 1
    out = capsys.readouterr()
    assert "pipeline/g applied (generation 1); its status cannot be observed now:" in out.out
    assert "error StorageRequestRejected" in out.err
    assert LocalPipeline(home, "g").generation == 1


def test_local_status_says_which_previewed_views_it_does_not_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The status keeps 100 of a preview's views: `local status` printed them with no word of
    the rest, nor of where the whole report is."""
    from spindle.checkpoint.store import open_store
    from spindle.plan.preview import PreviewReport, ViewPreview
    from tests.checkpoints import seed
    from tests.unit.test_status_bounds import NEW, OLD

    shared = tmp_path / "shared"
    store = open_store((shared / "default" / "grades").as_uri())
    seed(store, namespace="default", name="grades", program=OLD)
    document = yaml.safe_load(Path(MANIFEST).read_text())
    document["spec"] |= {"sql": NEW, "storage": {"uri": shared.as_uri()}}
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump(document))
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    main(["local", "apply", "-f", str(path), "--json", *home])
    change = json.loads(capsys.readouterr().out)["pendingChange"]["id"]
    same = {"status": "modified", "matched_by": (), "rows_before": 1, "rows_after": 1}
    views = [
        ViewPreview(name=f"v_{i:05d}", added=0, removed=0, changed=0, **same) for i in range(400)
    ]
    views.append(ViewPreview(name="z_own", added=0, removed=0, changed=1, **same))
    store.write_preview(
        PreviewReport(
            change_id=change, checkpoint="c", created_at="t", sample_rows=0, views=tuple(views)
        )
    )
    assert main(["local", "status", "grades", *home]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "z_own" in out
    assert "Not shown: 301 of preview.views (the status keeps 100 of each list)." in out
    assert f"The whole report is {store.uri}/previews/{change}.json." in out
