"""`spindle plan`: the change id a manifest needs, computed offline from its checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from spindle.checkpoint.store import open_store
from spindle.cli.main import main
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
    assert "No approval needed" in capsys.readouterr().out


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
