"""Mutated Pipeline manifests through `spindle local apply -f` and `spindle plan -f`: each ends
in a status or a plan with a CamelCase reason, or in a user error with a known reason, never an
internal error. The storage is the real S3 server, so bad URIs and buckets are answered by it.

CI runs 200 with a fixed seed; `make soak` runs the 1,000 the e2e storm sends to the
operator too (`tests/e2e/test_bad_input.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import soak
from tests.fuzz.manifests import MANIFEST_MUTATIONS
from tests.fuzz.run import describe, fuzz_manifests, report

SEED = 15
COUNT = soak.count(ci=200, soak=1000)


def base_manifest(s3: Any) -> dict[str, Any]:
    document = yaml.safe_load(Path("examples/grades/pipeline-v1.yaml").read_text())
    document["spec"]["storage"] = {
        "uri": f"s3://{s3.bucket('fuzz')}/pipelines",
        "endpoint": s3.endpoint,
        "region": s3.region,
        "credentials": {
            "accessKeyId": {"name": "s3", "key": "accessKeyId"},
            "secretAccessKey": {"name": "s3", "key": "secretAccessKey"},
        },
    }
    return dict(document)


def test_every_mutated_manifest_ends_in_a_reason(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    tally = fuzz_manifests(count=COUNT, seed=SEED, base=base_manifest(s3), work=tmp_path)
    print(report(tally, seed=SEED))
    assert tally.count == 2 * COUNT
    assert tally.internal_errors == 0
    assert not tally.violations, "\n".join(
        f"{describe(case)}: {outcome.violation}" for case, outcome in tally.violations
    )
    assert set(tally.mutations) >= set(MANIFEST_MUTATIONS) - {"sql_mutation"} or COUNT < 100
    accepted = {"Stopped", "NotRunning"}
    assert accepted & set(tally.outcomes), "no mutant stayed valid: the base is broken"
    assert tally.outcomes["InvalidManifest"] > 0 and tally.outcomes["InvalidStorageUri"] > 0
