"""Spark's class archive: a driver JVM maps the classes a pipeline step loads from one file
(the JVM's class data sharing) instead of reading, parsing and verifying them from the jars at
every start, which took most of a start's CPU (bench/startup.py prints the ratio).

An archive holds the classes of one java and one class path, and the JVM checks both (each
jar's size and modification time) before it maps one: its file name is a hash of the same, so
a new PySpark, jar or JDK gets a new archive, and a JVM that still cannot map one (other
options) starts without it, saying nothing. `$SPINDLE_CLASS_ARCHIVE` says what to do:

  auto   (the default) make the archive when a session first needs one, by running a small
         pipeline in a JVM that writes its classes when it exits (`class_training`, about
         a minute, once), then use it
  use    use an archive made before, never make one: the Spark image makes its own when it is
         built, so a driver pod never spends its start on it
  off    start without one

A training that fails leaves `<archive>.failed` with what it printed, and Spark starts
without an archive from then on: a start is never refused or delayed twice for it, nor by a
cache it cannot write. Making one removes what earlier ones left: a `.part` file of a training
that was killed, and archives of other class paths not made again for `STALE_DAYS` days.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from spindle.runtime.jars import cache_root

MODE_ENV = "SPINDLE_CLASS_ARCHIVE"
DUMP_ENV = "SPINDLE_CLASS_ARCHIVE_DUMP"
"""Set for the training process only: the file its JVM writes its classes to at exit."""
TRAINING_TIMEOUT = 600.0
STALE_DAYS = 14
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""The JVM warns on every start it cannot map an archive; it then starts as without one."""


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _stamp(path: Path) -> str:
    stat = path.stat()  # whole seconds, as the JVM checks (an image's layers keep no more)
    return f"{path}|{stat.st_size}|{int(stat.st_mtime)}"


LAUNCHER_ENV = (
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "HADOOP_CONF_DIR",
    "YARN_CONF_DIR",
    "SPARK_DIST_CLASSPATH",
)
"""What else Spark's launcher puts on the driver's class path."""


def archive_path(class_path: Sequence[str]) -> Path | None:
    """Where the archive of this java and these jars (in this order) is, made or not; None
    without a java. Spark's own jars (PySpark's `jars/`) follow `class_path`, as Spark's
    launcher orders them."""
    java = _java()
    if java is None:
        return None
    import pyspark

    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
    parts = [_stamp(java), *([_stamp(libjvm)] if libjvm.exists() else [])]
    parts += [f"{name}={os.environ.get(name, '')}" for name in LAUNCHER_ENV]
    parts += [_stamp(Path(p)) for p in class_path if Path(p).exists()]
    parts += [_stamp(p) for p in spark_jars]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_root() / "classes" / f"spark-{key}.jsa"


def java_options(class_path: Sequence[str], *, say: Callable[[str], None]) -> str:
    """The driver JVM's options for its class archive: mapping it (made first when the mode
    is `auto`), writing one (the training process), or none."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return f'-XX:ArchiveClassesAtExit="{dump}"'
    mode = os.environ.get(MODE_ENV, "auto")
    path = archive_path(class_path) if mode in ("auto", "use") else None
    if path is None:
        return ""
    if not path.exists() and mode == "auto":
        try:
            ensure(path, say=say)
        except OSError as error:  # a cache it cannot write: start as without one
            say(f"could not make Spark's class archive ({error}); Spark starts without one")
    return f'-XX:SharedArchiveFile="{path}" {QUIET}' if path.exists() else ""


@contextlib.contextmanager
def _locked(path: Path, *, say: Callable[[str], None]) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("waiting for another process making Spark's class archive")
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _tidy(path: Path) -> None:
    """Remove what earlier trainings left beside `path` (under its lock, so no training of
    it runs): their partial files, and archives of other class paths gone stale."""
    import time

    for partial in path.parent.glob(f"{path.name}.part*"):
        partial.unlink(missing_ok=True)
    stale = time.time() - STALE_DAYS * 86400
    for other in path.parent.glob("spark-*.jsa"):
        if other != path and other.stat().st_mtime < stale:
            other.unlink(missing_ok=True)


def ensure(path: Path, *, say: Callable[[str], None]) -> bool:
    """Make the archive at `path` unless it is there or its training failed before; whether
    it is there now. The training's JVM writes it in full before its process ends, to a file
    of its own that is then renamed: `path` is complete whenever it exists."""
    failed = path.with_name(path.name + ".failed")
    with _locked(path, say=say):
        if path.exists() or failed.exists():
            return path.exists()
        _tidy(path)
        say("making Spark's class archive, once (about a minute): later starts take less time")
        partial = path.with_name(f"{path.name}.part{os.getpid()}")
        env = {**os.environ, DUMP_ENV: str(partial), MODE_ENV: "off"}
        try:
            done = subprocess.run(
                [sys.executable, "-m", "spindle.runtime.class_training"],
                env=env,
                capture_output=True,
                text=True,
                timeout=TRAINING_TIMEOUT,
                check=False,
            )
            said, ok = done.stdout + done.stderr, done.returncode == 0
        except subprocess.TimeoutExpired as error:
            said, ok = f"timed out after {error.timeout:.0f} s", False
        if ok and partial.exists() and partial.stat().st_size > 0:
            partial.replace(path)
            say(f"made Spark's class archive {path}")
            return True
        partial.unlink(missing_ok=True)
        failed.write_text(said[-20000:])
        say(f"could not make Spark's class archive (see {failed}); Spark starts without one")
        return False
