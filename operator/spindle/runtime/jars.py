"""The JVM jars Spark needs for S3A and Delta Lake: pinned, fetched from Maven Central, cached.

`hadoop-aws` must match the Hadoop inside the installed PySpark wheel, and Delta's jars must
match its Spark version; both are checked here rather than trusted. Jars are cached under
`$SPINDLE_CACHE/jars` (default `~/.cache/spindle/jars`), verified against Maven's SHA-1, and
downloaded once. The Spark image bakes the same files in (see spark-images/).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MAVEN = os.environ.get("SPINDLE_MAVEN_URL", "https://repo1.maven.org/maven2")
HADOOP_VERSION = "3.5.0"
SPARK_VERSION = "4.2.0"
DELTA_VERSION = "4.4.0"


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}.jar"

    @property
    def url(self) -> str:
        return f"{MAVEN}/{self.group.replace('.', '/')}/{self.name}/{self.version}/{self.filename}"


ARTIFACTS: tuple[Artifact, ...] = (
    Artifact("org.apache.hadoop", "hadoop-aws", HADOOP_VERSION),
    Artifact("software.amazon.awssdk", "bundle", "2.35.4"),
    Artifact("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.3.1"),
    Artifact("io.delta", "delta-spark_2.13", DELTA_VERSION),
    Artifact("io.delta", "delta-storage", DELTA_VERSION),
)


def cache_root() -> Path:
    """Spindle's cache of downloads and builds: `$SPINDLE_CACHE`, default `~/.cache/spindle`."""
    return Path(os.environ.get("SPINDLE_CACHE", Path.home() / ".cache" / "spindle"))


def cache_dir() -> Path:
    return cache_root() / "jars"


def bundled_hadoop_version() -> str | None:
    """The Hadoop version inside the installed PySpark, from its hadoop-client-api jar."""
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    return None


def _download(artifact: Artifact, target: Path) -> None:
    with urllib.request.urlopen(artifact.url + ".sha1", timeout=60) as response:
        expected = response.read().decode().split()[0].strip()
    partial = target.with_suffix(f".part{os.getpid()}")
    digest = hashlib.sha1(usedforsecurity=False)
    with urllib.request.urlopen(artifact.url, timeout=300) as response, partial.open("wb") as out:
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != expected:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"checksum mismatch for {artifact.url}")
    partial.replace(target)  # atomic: a cached jar is always complete


def ensure_jars(*, log: bool = True) -> list[Path]:
    """Paths of every jar, downloading the missing ones."""
    bundled = bundled_hadoop_version()
    if bundled is not None and bundled != HADOOP_VERSION:
        raise RuntimeError(
            f"PySpark bundles Hadoop {bundled} but hadoop-aws is pinned to {HADOOP_VERSION}; "
            "update HADOOP_VERSION in spindle/runtime/jars.py"
        )
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for artifact in ARTIFACTS:
        target = directory / artifact.filename
        if not target.exists():
            start = time.monotonic()
            if log:
                print(f"[spindle] fetching {artifact.filename} from Maven Central", file=sys.stderr)
            _download(artifact, target)
            if log:
                print(
                    f"[spindle] fetched {artifact.filename} in {time.monotonic() - start:.1f}s",
                    file=sys.stderr,
                )
        paths.append(target)
    return paths


if __name__ == "__main__":
    for path in ensure_jars():
        print(path)
