"""Spark's class archive, for real: a first session makes it (once), a session then maps Spark's
classes from it rather than reading them from the jars, a new jar makes another, and a training
that fails is said once and never delays a start again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spindle.runtime import class_archive, jars

pytestmark = [pytest.mark.spark]

SESSION = """
from spindle.runtime.session import spark_session
spark = spark_session()
assert spark.range(3).count() == 3
spark.stop()
"""


def start(cache: Path, log: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A process that starts a default local session, its JVM logging each class it loads and
    from where."""
    return subprocess.run(
        [sys.executable, "-c", SESSION],
        env={
            **os.environ,
            "SPINDLE_CACHE": str(cache),
            "JDK_JAVA_OPTIONS": f"-Xlog:class+load=info:file={log}",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )


def loaded_from(log: Path, name: str) -> str:
    [line] = [line for line in log.read_text().splitlines() if f"] {name} source: " in line]
    return line.split(" source: ", 1)[1]


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """A cache of its own with the machine's jars (linked, not downloaded again)."""
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "jars").symlink_to(jars.cache_dir().resolve())
    return tmp_path / "cache"


def test_a_first_session_makes_the_archive_and_the_next_maps_spark_from_it(
    cache: Path, tmp_path: Path
) -> None:
    first = start(cache, tmp_path / "first.log")
    assert "making Spark's class archive, once" in first.stderr, first.stderr
    [archive] = (cache / "classes").glob("*.jsa")
    assert not list((cache / "classes").glob("*.part*"))  # made whole, then renamed
    # the first session started after the archive was made: it maps it already
    assert loaded_from(tmp_path / "first.log", "org.apache.spark.sql.SparkSession") == (
        "shared objects file (top)"
    )
    second = start(cache, tmp_path / "second.log")
    assert "class archive" not in second.stderr, second.stderr  # made once
    assert loaded_from(tmp_path / "second.log", "org.apache.spark.SparkContext") == (
        "shared objects file (top)"
    )
    off = start(cache, tmp_path / "off.log", SPINDLE_CLASS_ARCHIVE="off")
    assert "class archive" not in off.stderr
    assert loaded_from(tmp_path / "off.log", "org.apache.spark.sql.SparkSession").startswith(
        "file:"
    )
    # `use` never makes one: the Spark image's mode, whose build made it
    archive.unlink()
    used = start(cache, tmp_path / "use.log", SPINDLE_CLASS_ARCHIVE="use")
    assert "class archive" not in used.stderr and not archive.exists()


def test_another_jar_is_another_archive(tmp_path: Path) -> None:
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"PK")
    before = class_archive.archive_path([str(jar)])
    os.utime(jar, ns=(0, 1_000_000_000))
    after = class_archive.archive_path([str(jar)])
    assert before is not None and after is not None and before != after
    assert after == class_archive.archive_path([str(jar)])
    # the JVM checks whole seconds, and an image's layers keep no more: the same archive
    os.utime(jar, ns=(0, 1_999_000_000))
    assert class_archive.archive_path([str(jar)]) == after


def test_a_cache_it_cannot_write_is_said_and_spark_starts_without_an_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("SPINDLE_CACHE", str(tmp_path / "file" / "cache"))
    said: list[str] = []
    assert class_archive.java_options([], say=said.append) == ""
    [line] = said
    assert line.startswith("could not make Spark's class archive (") and "starts without" in line


def test_a_failed_training_is_said_once_and_never_tried_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    path = cache / "classes" / "spark-test.jsa"
    path.parent.mkdir()
    left = [path.with_name("spark-test.jsa.part999"), path.with_name("spark-old.jsa")]
    for stale in left:  # a killed training's file, another class path's archive of a month ago
        stale.write_bytes(b"x")
        os.utime(stale, (0, 0))
    recent = path.with_name("spark-recent.jsa")
    recent.write_bytes(b"x")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "no-spark"))  # its JVM cannot start
    assert not class_archive.ensure(path, say=said.append)
    assert not class_archive.ensure(path, say=said.append)
    assert said[0].startswith("making Spark's class archive")
    assert said[1].startswith("could not make Spark's class archive (see ")
    assert len(said) == 2  # the second call tried nothing
    assert path.with_name("spark-test.jsa.failed").read_text()
    assert not path.exists()
    assert not [p for p in left if p.exists()] and recent.exists()
