"""Every CLI command that reads a file, given a file that cannot be used: a reason and a message
that names the file, exit status 1, never an internal error or a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from spindle.cli.main import main

GRADES = Path("examples/grades")
V1 = str(GRADES / "v1.sql")
MANIFEST = str(GRADES / "pipeline-v1.yaml")
BINARY = bytes(range(256)) * 8  # NUL bytes and bytes that are not UTF-8


def commands(home: Path) -> dict[str, Callable[[str], list[str]]]:
    """Each command that reads a user's file, as argv with that file in it."""
    return {
        "diff old": lambda path: ["diff", "--json", path, V1],
        "diff new": lambda path: ["diff", "--json", V1, path],
        "local apply": lambda path: ["local", "apply", "--home", str(home), "--json", "-f", path],
        "plan": lambda path: ["plan", "--json", "-f", path, "--checkpoint", str(home / "none")],
    }


COMMANDS = ["diff old", "diff new", "local apply", "plan"]
PROGRAM = {"diff old", "diff new"}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, json.loads(out.out)


@pytest.fixture
def bad_files(tmp_path: Path) -> Iterator[dict[str, str]]:
    (tmp_path / "empty.sql").write_bytes(b"")
    (tmp_path / "blank.sql").write_bytes(b" \n\t\n")
    (tmp_path / "binary.sql").write_bytes(BINARY)
    (tmp_path / "latin1.sql").write_bytes("create table caf\xe9 (a int);".encode("latin-1"))
    (tmp_path / "folder").mkdir()
    yield {
        "missing": str(tmp_path / "missing.sql"),
        "directory": str(tmp_path / "folder"),
        "empty": str(tmp_path / "empty.sql"),
        "blank": str(tmp_path / "blank.sql"),
        "binary": str(tmp_path / "binary.sql"),
        "latin1": str(tmp_path / "latin1.sql"),
        "endless": "/dev/zero",
    }


EXPECTED = {
    # kind: (reason for a program file, reason for a manifest file, words in the message)
    "missing": ("FileUnreadable", "FileUnreadable", "No such file"),
    "directory": ("FileUnreadable", "FileUnreadable", "not a directory"),
    "empty": ("FileUnreadable", "FileUnreadable", "it is empty"),
    "blank": ("FileUnreadable", "FileUnreadable", "it is empty"),
    "binary": ("InvalidProgram", "FileUnreadable", "UTF-8"),
    "latin1": ("InvalidProgram", "FileUnreadable", "UTF-8"),
    "endless": ("ProgramTooLarge", "FileUnreadable", "bytes"),
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
@pytest.mark.parametrize("command", COMMANDS)
def test_unusable_files_are_user_errors(
    command: str,
    kind: str,
    bad_files: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = bad_files[kind]
    code, body = run(commands(tmp_path)[command](path), capsys)
    program_reason, manifest_reason, words = EXPECTED[kind]
    assert code == 1
    assert body["error_code"] == (program_reason if command in PROGRAM else manifest_reason)
    message = str(body["message"])
    assert path in message and words in message, message


def test_a_program_that_is_not_utf8_is_located(
    bad_files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, body = run(["diff", "--json", V1, bad_files["latin1"]], capsys)
    assert body["details"] == {
        "line": 1,
        "column": 17,
        "byte_offset": 16,
        "file": bad_files["latin1"],
    }


def test_a_manifest_that_is_not_utf8_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyYAML said `position 163` of `"<byte string>"`."""
    manifest = tmp_path / "latin1.yaml"
    manifest.write_bytes("kind: Pipeline\nspec:\n  sql: select 'caf\xe9'\n".encode("latin-1"))
    _, body = run(["plan", "-f", str(manifest), "--json"], capsys)
    assert body["error_code"] == "FileUnreadable"
    assert body["details"] == {"line": 3, "column": 19, "byte_offset": 39, "file": str(manifest)}
    assert str(body["message"]).startswith(f"{manifest}: Byte 0xE9 is not UTF-8 text")


@pytest.mark.parametrize("command", ["local apply", "plan"])
def test_binary_standard_input_is_a_user_error(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BINARY)))
    code, body = run(commands(tmp_path)[command]("-"), capsys)
    assert code == 1 and body["error_code"] == "FileUnreadable"


NOBODY = 65534


def outcomes_as_nobody(argvs: list[list[str]], locked: str) -> list[dict[str, object]]:
    """Run the commands in a forked child that, when this is root (for whom every file is
    readable), becomes `nobody` first. The child only forks, no exec (the interpreter under
    /root stays usable), so the commands first run here on a missing file: what they import
    is imported before the fork."""
    with contextlib.redirect_stdout(io.StringIO()):
        for argv in argvs:
            main([arg.replace(locked, f"{locked}.missing") for arg in argv])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the outcomes through the pipe, whatever happens
        lines = []
        try:
            if os.geteuid() == 0:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            for argv in argvs:
                out = io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    code = main(argv)
                lines.append(json.dumps({"code": code, "body": json.loads(out.getvalue())}))
        except BaseException:
            lines.append(json.dumps({"crash": traceback.format_exc()}))
        finally:
            os.write(write, "\n".join(lines).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        output = pipe.read()
    os.waitpid(pid, 0)
    return [json.loads(line) for line in output.splitlines()]


def test_files_without_read_permission_are_user_errors() -> None:
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        locked = Path(folder) / "locked.sql"
        locked.write_text(Path(V1).read_text())
        locked.chmod(0o000)
        home = Path(folder) / "home"
        argvs = [commands(home)[name](str(locked)) for name in COMMANDS]
        outcomes = outcomes_as_nobody(argvs, str(locked))
    assert len(outcomes) == len(COMMANDS), outcomes
    for outcome in outcomes:
        body = outcome["body"]
        assert isinstance(body, dict), outcome
        assert outcome["code"] == 1 and body["error_code"] == "FileUnreadable"
        assert "Permission denied" in body["message"] and str(locked) in body["message"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_under_the_users_home_is_found_in_every_spelling(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shell expands `~` in `-f ~/p.yaml`, not in `--file=~/p.yaml` (nor in quotes):
    that was "Cannot read ~/p.yaml: No such file", where `--home=~/h` found the home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    source = V1 if command in PROGRAM else MANIFEST
    (tmp_path / "mine").write_bytes(Path(source).read_bytes())
    argv = commands(tmp_path / "home")[command]("~/mine")
    assert main(argv) in (0, 1)  # a diff of two programs that differ exits 1
    out = capsys.readouterr()
    assert "FileUnreadable" not in out.out + out.err
    code, body = run(commands(tmp_path / "home")[command]("~/gone"), capsys)
    assert code == 1 and body["error_code"] == "FileUnreadable"
    assert f"Cannot read ~/gone ({tmp_path}/gone): No such file" in str(body["message"])


def test_user_text_in_messages_and_plans_is_never_markup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old.sql", tmp_path / "new.sql"
    old.write_text('create table t ("[/x]" int);\n')  # a relation's name cannot have [ or /
    new.write_text('create table t ("[/x]" int, "[/x]" int);\n')
    assert main(["diff", str(old), str(old)]) == 0
    assert main(["diff", str(old), str(new)]) == 1
    out = capsys.readouterr()
    assert "DuplicateColumn" in out.err and "declares column '[/x]' twice" in out.err
    entry = {"name": "[/x]", "transport": {"name": "file_input", "config": {"path": "/in"}}}
    new.write_text(
        f"create table t (\"[/x]\" int) with ('connectors' = '[{json.dumps(entry)}]');\n"
    )
    assert main(["diff", str(old), str(new)]) == 0
    assert "t.[/x]" in capsys.readouterr().out


def test_a_program_over_the_token_limit_is_refused_before_any_analysis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from spindle.cli import analysis
    from spindle.program.limits import MAX_TOKENS

    def no_analysis(*args: object, **kwargs: object) -> int:
        raise AssertionError("analyzed a program over the limits")

    monkeypatch.setattr(analysis, "prime", no_analysis)
    wordy = tmp_path / "wordy.sql"
    wordy.write_text("create table t (a int);\n" * (MAX_TOKENS // 8 + 1))
    code, body = run(["diff", "--json", V1, str(wordy)], capsys)
    assert code == 1 and body["error_code"] == "ProgramTooLarge"
    assert str(wordy) in str(body["message"]) and body["details"]["limit"] == MAX_TOKENS


BOMB = (
    "{l0: &l0 lol, "
    + ", ".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10))
    + "}"
)
BOMBS = {
    # found by tests/fuzz/test_manifests.py: a MemoryError (InternalError) where the schema
    # allows any value; and the bomb as the program, and an alias inside its own anchor
    "under metadata": ("metadata:\n", f"metadata:\n  laughs: {BOMB}\n"),
    "as the program": ("spec:\n  sql: |", f"x-anchors: {BOMB}\nspec:\n  sql: *l9\n  old: |"),
    "in its own anchor": ("metadata:\n", "metadata:\n  loop: &a [*a]\n"),
}


@pytest.mark.parametrize("case", sorted(BOMBS))
@pytest.mark.parametrize("command", ["local apply", "plan"])
def test_yaml_bombs_are_refused_before_they_expand(
    case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where, bomb = BOMBS[case]
    path = tmp_path / "pipeline.yaml"
    path.write_text(Path(MANIFEST).read_text().replace(where, bomb, 1))
    code, body = run(commands(tmp_path)[command](str(path)), capsys)
    assert code == 1 and body["error_code"] == "InvalidManifest", body
    assert "YAML bomb" in str(body["message"]), body


@pytest.mark.parametrize(
    ("storage", "reason", "said"),
    [  # found by tests/fuzz/test_manifests.py: an InternalError, and a 10 s retry of a bucket
        ({"uri": "s3://b/p", "endpoint": "1e400"}, "InvalidManifest", "endpoint"),
        (
            {"uri": "s3://a bucket/p", "endpoint": "http://127.0.0.1:1"},
            "InvalidStorageUri",
            "bucket",
        ),
    ],
)
def test_storage_that_once_crashed_or_hung_is_a_user_error(
    storage: dict[str, str],
    reason: str,
    said: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = yaml.safe_load(Path(MANIFEST).read_text())
    document["spec"]["storage"] = storage
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(document))
    for argv in (commands(tmp_path)["local apply"](str(path)), ["plan", "--json", "-f", str(path)]):
        code, body = run(argv, capsys)
        assert code == 1 and body["error_code"] == reason, body
        assert said in str(body["message"]), body


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        # only "spec.sql: Field required", though the key was there, misspelt
        (
            "  sqll: create table t (a int);\n",
            "spec.sql: Field required (it has 'sqll': did you mean 'sql'?)",
        ),
        # SQL pasted below bootstrapPolicy folds into its value, which the message hid
        (
            "  sql: create table t (a int);\n  bootstrapPolicy: allow\n    create view v\n",
            "spec.bootstrapPolicy: Input should be 'await_approval', 'allow' or 'reject' (it is "
            "'allow create view v')",
        ),
    ],
)
def test_a_manifest_error_shows_what_the_manifest_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, said: str
) -> None:
    manifest = tmp_path / "p.yaml"
    manifest.write_text(
        "apiVersion: spindle.dev/v1alpha1\nkind: Pipeline\nmetadata:\n  name: p\nspec:\n" + spec
    )
    assert main(["plan", "-f", str(manifest)]) == 1
    assert said in capsys.readouterr().err.replace("\n", " ")


def test_every_field_a_manifest_gets_wrong_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three misspelt fields took three runs: only the first was named."""
    manifest = tmp_path / "p.yaml"
    manifest.write_text(
        "apiVersion: spindle.dev/v1alpha1\nkind: Pipeline\nmetadata:\n  name: p\nspec:\n"
        "  sql: create table t (a int);\n  desiredstate: Paused\n  storag: {}\n"
    )
    _, body = run(["plan", "-f", str(manifest), "--json"], capsys)
    assert body["error_code"] == "InvalidManifest"
    assert body["details"]["problems"] == 2  # type: ignore[index]
    assert body["details"]["more"] == ["spec.storag: Extra inputs are not permitted"]  # type: ignore[index]
    assert main(["plan", "-f", str(manifest)]) == 1
    assert "  also: spec.storag: Extra inputs are not permitted" in capsys.readouterr().err


def test_a_yaml_error_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "p.yaml"
    manifest.write_text("apiVersion: [1\nkind: 2\n")
    assert main(["plan", "-f", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert (
        f"in {manifest}, line 1, column 13" in err.replace("\n", " ") and "<byte string>" not in err
    )
