"""`spindle plan`: the change id a manifest needs, computed offline from its checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from spindle.api.types import load_manifest_document
from spindle.checkpoint.store import open_store
from spindle.cli.main import main
from spindle.lifecycle import Observation, decide
from spindle.program import parse_program
from spindle.versions import RUNTIME_VERSION
from tests.checkpoints import GRADES_V1, seed

EXAMPLE = Path("examples/grades")


def _checkpointed(root: Path) -> str:
    uri = root.as_uri()
    seed(open_store(uri), namespace="default", name="grades", program=GRADES_V1)
    return uri


def test_plan_prints_the_change_id_the_operator_will_ask_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _checkpointed(tmp_path / "root")
    assert (
        main(["plan", "-f", str(EXAMPLE / "pipeline-v2.yaml"), "--checkpoint", uri, "--json"]) == 0
    )
    body = json.loads(capsys.readouterr().out)
    assert body["changeId"] == "b77cf0f27757" and body["needsApproval"] is True
    assert body["pendingChange"]["diff"]["program_diff"]["added_views"] == ["avg_grade_all_courses"]

    assert main(["plan", "-f", str(EXAMPLE / "pipeline-v1.yaml"), "--checkpoint", uri]) == 0
    assert "the program matches checkpoint 0000" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("policy", "approval", "needs", "reason", "says"),
    [
        ("await_approval", None, True, "AwaitingApproval", 'spindle.dev/approve: "b77cf0f27757"'),
        (
            "await_approval",
            "000000000000",
            True,
            "AwaitingApproval",
            'spindle.dev/approve: "000000000000" names another change: the operator ignores it',
        ),
        (
            "await_approval",
            "b77cf0f27757",
            False,
            "Bootstrapping",
            "Approved: the manifest's spindle.dev/approve names change b77cf0f27757",
        ),
        (  # YAML's `|` adds a newline: the operator reads it without, and bootstraps
            "await_approval",
            "b77cf0f27757\n",
            False,
            "Bootstrapping",
            "Approved: the manifest's spindle.dev/approve names change b77cf0f27757",
        ),
        ("allow", None, False, "Bootstrapping", "bootstrapPolicy allow starts it"),
        ("reject", None, False, "BootstrapRejected", "bootstrapPolicy is reject: change"),
    ],
)
def test_plan_says_what_the_manifest_as_committed_leads_to(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    policy: str,
    approval: str | None,
    needs: bool,
    reason: str,
    says: str,
) -> None:
    """The GitOps gate reads the policy and the approval in the manifest: a stale approval is
    flagged (the operator ignores it), and no approval is asked for where none is needed or
    none would be honoured."""
    uri = _checkpointed(tmp_path / "root")
    document = yaml.safe_load((EXAMPLE / "pipeline-v2.yaml").read_text())
    document["spec"]["bootstrapPolicy"] = policy
    if approval is not None:
        document["metadata"]["annotations"] = {"spindle.dev/approve": approval}
    manifest = tmp_path / "v2.yaml"
    manifest.write_text(yaml.safe_dump(document))
    assert main(["plan", "-f", str(manifest), "--checkpoint", uri, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["needsApproval"], body["reason"], body["changeId"]) == (
        needs,
        reason,
        "b77cf0f27757",
    )
    assert main(["plan", "-f", str(manifest), "--checkpoint", uri]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert says in out
    assert ("Approve with change id" in out) is (policy == "await_approval")


def test_a_stopped_pipeline_with_a_changed_program_is_not_said_to_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With desiredState: Stopped, plan said "the program matches checkpoint ..." of a
    changed program: it prints the plan and its change id, and that nothing bootstraps until
    desiredState is Running; only an unchanged program matches."""
    uri = _checkpointed(tmp_path / "root")
    for version in ("v1", "v2"):
        document = yaml.safe_load((EXAMPLE / f"pipeline-{version}.yaml").read_text())
        document["spec"]["desiredState"] = "Stopped"
        (tmp_path / f"{version}.yaml").write_text(yaml.safe_dump(document))
    changed = str(tmp_path / "v2.yaml")
    assert main(["plan", "-f", changed, "--checkpoint", uri]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "matches" not in out and "Change b77cf0f27757" in out
    assert (
        "The pipeline is stopped (spec.desiredState: Stopped): change b77cf0f27757 does not "
        "bootstrap, and nothing runs, until desiredState is Running." in out
    )
    assert main(["plan", "-f", changed, "--checkpoint", uri, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["changeId"], body["reason"], body["needsApproval"]) == (
        "b77cf0f27757",
        "Stopped",
        False,
    )
    assert body["pendingChange"]["diff"]["program_diff"]["added_views"] == ["avg_grade_all_courses"]

    assert main(["plan", "-f", str(tmp_path / "v1.yaml"), "--checkpoint", uri]) == 0
    assert "the program matches checkpoint 0000" in capsys.readouterr().out
    assert main(["plan", "-f", str(tmp_path / "v1.yaml"), "--checkpoint", uri, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["changeId"], body["pendingChange"], body["reason"]) == (None, None, "Stopped")


def test_plan_and_diff_list_the_programs_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A property no one reads is a warning, in the JSON a script reads too."""
    document = yaml.safe_load((EXAMPLE / "pipeline-v1.yaml").read_text())
    sql = document["spec"]["sql"].replace("'materialized' = 'true'", "'colour' = 'blue'", 1)
    assert sql != document["spec"]["sql"]
    document["spec"]["sql"] = sql
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(yaml.safe_dump(document))
    typo = (tmp_path / "no-such-root").as_uri()
    assert main(["plan", "-f", str(manifest), "--checkpoint", typo, "--json"]) == 0
    [warning] = json.loads(capsys.readouterr().out)["warnings"]
    assert "'colour'" in warning
    assert main(["plan", "-f", str(manifest), "--checkpoint", typo]) == 0
    assert "warning: " in capsys.readouterr().out
    (tmp_path / "old.sql").write_text(GRADES_V1)
    (tmp_path / "new.sql").write_text(sql)
    assert main(["diff", str(tmp_path / "old.sql"), str(tmp_path / "new.sql"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == [warning]


def test_plan_against_a_root_without_checkpoints_says_it_starts_from_scratch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped root in a GitOps gate read "the program matches checkpoint (none yet)"."""
    typo = (tmp_path / "no-such-root").as_uri()
    manifest = str(EXAMPLE / "pipeline-v2.yaml")
    assert main(["plan", "-f", manifest, "--checkpoint", typo]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"there is no checkpoint at {typo}, so the pipeline starts from scratch" in out
    assert "If it has run before, that is not its root" in out
    assert main(["plan", "-f", manifest, "--checkpoint", typo, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["checkpoint"], body["checkpointRoot"]) == (None, typo)


def test_plan_uses_spec_storage_and_explains_when_there_is_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _checkpointed(tmp_path / "store" / "default" / "grades")
    document = yaml.safe_load((EXAMPLE / "pipeline-v2.yaml").read_text())
    document["spec"]["storage"] = {"uri": (tmp_path / "store").as_uri()}
    manifest = tmp_path / "v2.yaml"
    manifest.write_text(yaml.safe_dump(document))
    assert main(["plan", "-f", str(manifest)]) == 0
    assert 'spindle.dev/approve: "b77cf0f27757"' in capsys.readouterr().out

    assert main(["plan", "-f", str(EXAMPLE / "pipeline-v2.yaml"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error_code"] == "StorageNotConfigured"


@pytest.mark.parametrize(
    ("sql", "reason", "also"),
    [
        ("create table t (id int);\ncreate view v as selec id from t;", "InvalidProgram", 0),
        (
            "create table t (id int, at time);\ncreate view v as select scroe, avgg(id) from t;",
            "UnsupportedType",
            2,
        ),
    ],
)
def test_plan_fails_a_program_that_cannot_run_and_lists_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str, reason: str, also: int
) -> None:
    """A GitOps check must fail on a program the operator would refuse: `plan` said "No
    approval needed (InvalidProgram)" and exited 0."""
    document = yaml.safe_load((EXAMPLE / "pipeline-v1.yaml").read_text())
    document["spec"]["sql"] = sql
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(document))
    uri = (tmp_path / "root").as_uri()
    assert main(["plan", "-f", str(manifest), "--checkpoint", uri]) == 1
    said = capsys.readouterr()
    assert f"error {reason}: " in said.err and "No approval needed" not in said.out
    assert said.err.count("  also: ") == also
    assert main(["plan", "-f", str(manifest), "--checkpoint", uri, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error_code"] == reason
    assert main(["plan", "-f", str(manifest)]) == 1  # no storage: the program is still checked
    assert f"error {reason}: " in capsys.readouterr().err


def _pinned(tmp_path: Path, version: str | None) -> str:
    document = yaml.safe_load((EXAMPLE / "pipeline-v1.yaml").read_text())
    if version is not None:
        document["spec"]["runtimeVersion"] = version
    manifest = tmp_path / f"pinned-{version}.yaml"
    manifest.write_text(yaml.safe_dump(document))
    return str(manifest)


def test_runtime_pinning_against_a_checkpoint_written_by_runtime_a(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runtime A is the one the checkpoint names (stamped when it was committed); runtime B is
    another one this Spindle runs. Pinned to A: no `runtime` reason. Unpinned under B: every
    view present in both programs is modified with reason `runtime`, tables are not
    (docs/operations.md). An unknown pin is `InvalidSpec`."""
    uri = _checkpointed(tmp_path / "root")
    checkpoint = open_store(uri).latest()
    assert checkpoint is not None
    runtime_a = checkpoint.runtime_version
    assert runtime_a == RUNTIME_VERSION

    assert main(["plan", "-f", _pinned(tmp_path, runtime_a), "--checkpoint", uri, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["needsApproval"] is False and body["pendingChange"] is None

    spec = load_manifest_document(
        yaml.safe_load(Path(_pinned(tmp_path, None)).read_text()), source="v1"
    ).spec
    under_b = decide(
        Observation(spec=spec, generation=0, checkpoint=checkpoint, runtime_version="b")
    )
    assert under_b.plan is not None and under_b.pending_change is not None
    changes = under_b.plan.changes
    views = set(parse_program(GRADES_V1).views)
    assert {n for n, c in changes.items() if "runtime" in c.reasons} == views
    assert all(changes[n].kind == "view" and changes[n].category == "breaking" for n in changes)
    assert set(under_b.plan.diff.program_diff.modified_views) == views
    assert under_b.plan.diff.program_diff.modified_tables == ()
    pinned_a = spec.model_copy(update={"runtime_version": runtime_a})
    under_b_pinned = decide(
        Observation(spec=pinned_a, generation=0, checkpoint=checkpoint, runtime_version="b")
    )
    assert under_b_pinned.pending_change is None
    assert under_b_pinned.plan is not None and under_b_pinned.plan.changes == {}

    assert main(["plan", "-f", _pinned(tmp_path, "v0"), "--checkpoint", uri, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error_code"] == "InvalidSpec"


def test_plan_shows_the_estimate_and_plans_a_restate_annotation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _checkpointed(tmp_path / "root")
    assert main(["plan", "-f", str(EXAMPLE / "pipeline-v2.yaml"), "--checkpoint", uri]) == 0
    out = capsys.readouterr().out
    assert "Estimate: 3 views to evaluate" in out
    assert "rows read from connectors: 0" in out
    document = yaml.safe_load((EXAMPLE / "pipeline-v1.yaml").read_text())
    document["metadata"]["annotations"] = {"spindle.dev/restate": "avg_grade_enriched"}
    manifest = tmp_path / "restate.yaml"
    manifest.write_text(yaml.safe_dump(document))
    assert main(["plan", "-f", str(manifest), "--checkpoint", uri, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["needsApproval"] is True and body["pendingChange"]["reason"] == "restate"
    assert body["pendingChange"]["estimate"]["viewsToEvaluate"] == ["avg_grade_enriched"]


MANIFEST = """\
apiVersion: spindle.dev/v1alpha1
kind: Pipeline
metadata:
  name: demo
spec:
  sql: |

    create table t (a int);
    create view v as
      select b, frob(a) as f from t;
"""


def test_a_problem_is_located_in_the_manifest_file_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spec.sql` starts at the file's line 7 (a blank line first), indented by 4: the error
    said only `line 4, column 10`, the place in spec.sql, while the editor shows line 10."""
    manifest = tmp_path / "p.yaml"
    manifest.write_text(MANIFEST)
    assert main(["plan", "-f", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert f"({manifest} line 10, column 14; spec.sql line 4, column 10)" in err
    assert "also: View 'v' calls 'frob'" in err and f"({manifest} line 10, column 17;" in err
    assert main(["plan", "-f", str(manifest), "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert (body["details"]["line"], body["details"]["column"]) == (4, 10)  # spec.sql's
    folded = MANIFEST.replace("sql: |", "sql: >")  # lines folded: no file position to give
    manifest.write_text(folded)
    assert main(["plan", "-f", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert f"{manifest} line" not in err  # but said as spec.sql's, not read as the file's
    assert "(spec.sql line " in err and "(line " not in err


@pytest.mark.parametrize(
    ("text", "line", "indent"),
    [
        ("spec:\n  sql: |\n    create table t (a int);\n", 3, 4),
        ("spec:\n  sql: |-\n\n    create table t (a int);\n", 3, 4),  # a blank line first
        # an explicit indentation: the first line may be indented more than the block
        ("spec:\n  sql: |2\n      create table t (a int);\n    select 1;\n", 3, 4),
        # a key given twice: YAML keeps the last
        ("spec:\n  sql: |\n    a\n  sql: |\n      b\n", 5, 6),
        ("spec:\n  sql: 'create table t (a int);'\n", None, None),  # not a block: no lines kept
    ],
)
def test_where_spec_sql_starts_in_a_manifest(
    text: str, line: int | None, indent: int | None
) -> None:
    from spindle.cli.sql_origin import sql_origin

    origin = sql_origin(text.encode(), path="p.yaml")
    assert origin is not None
    if line is None:
        assert not origin.in_file
        assert origin.said("x (line 2, column 5)") == "x (spec.sql line 2, column 5)"
    else:
        assert (origin.line, origin.indent, origin.in_file) == (line, indent, True)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (Path("examples/grades/v1.sql").read_text(), "holds text, not a Pipeline manifest"),
        ("- a\n- b\n", "holds a list, not a Pipeline manifest"),
        ("42\n", "holds a number, not a Pipeline manifest"),
    ],
)
def test_a_file_that_is_not_a_manifest_says_what_it_holds(
    text: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spindle plan -f v1.sql` said pydantic's "Input should be a valid dictionary or
    instance of PipelineManifest", at an empty location."""
    path = tmp_path / "given.yaml"
    path.write_text(text)
    assert main(["plan", "-f", str(path), "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert body["error_code"] == "InvalidManifest"
    assert body["message"].startswith(f"{path} {says} (a YAML or JSON mapping")
    assert ("spindle diff OLD NEW" in body["message"]) == text.startswith("create")
