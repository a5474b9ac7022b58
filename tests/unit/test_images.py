"""The Dockerfiles, checked without a container engine: what they copy exists, every version is
pinned (and matches the project's pins), and the entrypoints they name run here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from spindle.runtime import jars

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = [ROOT / "Dockerfile", ROOT / "spark-images" / "Dockerfile"]


def instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            rows.append((keyword.upper(), rest.strip()))
    return rows


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name or "root")
def test_every_copied_path_exists(dockerfile: Path) -> None:
    for keyword, rest in instructions(dockerfile):
        if keyword == "COPY" and not rest.startswith("--from"):
            *sources, _ = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), f"{dockerfile}: COPY {source} does not exist"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name or "root")
def test_every_version_is_pinned(dockerfile: Path) -> None:
    rows = instructions(dockerfile)
    args = dict(rest.split("=", 1) for k, rest in rows if k == "ARG" and "=" in rest)
    for keyword, rest in rows:
        if keyword == "FROM":
            image = rest.split()[0]
            image = args.get(image.strip("${}"), image) if image.startswith("$") else image
            assert re.search(r":\d+\.\d+\.\d+", image), f"FROM {image} is not pinned"
        if keyword == "RUN" and "pip install" in rest:
            tools = re.findall(r'"([a-z-]+)(==)?', rest)
            assert all(pinned for _, pinned in tools), f"unpinned pip install: {rest}"
            if "[operator]" in rest or "[runtime]" in rest:
                assert "-c /tmp/constraints.txt" in rest, "project installs use the constraints"
    constraints = (ROOT / "constraints.txt").read_text()
    assert f"pyspark=={jars.SPARK_VERSION}" in constraints
    if "spark-images" in str(dockerfile):
        assert "openjdk-17-jre-headless=17.0.*" in dockerfile.read_text()
        assert "python /tmp/jars.py" in dockerfile.read_text()
        assert "USER 185:185" in dockerfile.read_text()
    else:
        assert "USER 10001:10001" in dockerfile.read_text()
        assert "java" not in dockerfile.read_text().lower().replace("no java", "")


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["operator", "--help"],
        ["driver", "--help"],
        ["plan", "--help"],
    ],
)
def test_the_entrypoints_run(argv: list[str]) -> None:
    spindle = Path(sys.executable).parent / "spindle"
    result = subprocess.run([str(spindle), *argv], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_the_jar_step_of_the_spark_image_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "operator" / "spindle" / "runtime" / "jars.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert all(path.exists() for path in jars.ensure_jars(log=False))
