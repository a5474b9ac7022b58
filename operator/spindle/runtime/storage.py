"""Files and Delta tables as Spark sees them: URIs, listing, moving, and versions.

Object storage URIs are `s3://` for boto3 and `s3a://` for Spark; `spark_uri` converts.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spindle.checkpoint.blobs import local_path, place, relative
from spindle.runtime import semantics


def spark_uri(uri: str) -> str:
    """`uri` as Spark is given it: `s3a://` for `s3://`, and a relative local path made
    absolute from this process's working directory. A served command's Spark runs in the
    directory its server started in, not the client's: a relative output's files were
    written there and lost (`cli.warm_server`)."""
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    local = local_path(uri)
    return f"file:{local}" if local is not None and relative(uri) else uri


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts if p)])


def _fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm  # the Hadoop FileSystem API has no Python face
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def list_status(spark: SparkSession, uri: str) -> list[tuple[str, int]]:
    """Data files under a directory or prefix, recursively, with their modification times (ms
    since the epoch), sorted by path, named as Hadoop names them (`file:/a/b.json`,
    `s3a://bucket/a/b.json`); hidden files skipped (a name starting with `.` or `_`, or under
    such a directory). One metadata listing: no file is opened.

    A file input lists its whole directory every step, so the listing's cost per file is what
    a long-running pipeline pays most often: a local directory is listed by Python (Hadoop's
    local listing starts a `stat` process per file to fill in owners and permissions), and
    any other file system in one Hadoop listing read back in a few calls (`_hadoop_status`),
    not several py4j calls per file."""
    local = local_path(uri)
    if local is not None:
        found = _local_status(local)
    else:
        fs, path = _fs(spark, uri)
        if not fs.exists(path):
            return []
        root = fs.makeQualified(path).toString().rstrip("/")
        listed = _hadoop_status(spark, fs.listFiles(path, True))
        found = [(name, mtime) for name, mtime in listed if not _hidden(name[len(root) :])]
    return sorted(found)


def within(path: str, location: str) -> bool:
    """Whether `path` is the file `location` names or a file under it, however each is
    spelled (`/a`, `file:/a`, `file:///a`; `s3://b/k`, `s3a://b/k`)."""
    file, root = place(path), place(location)
    return file == root or file.startswith(root.rstrip("/") + "/")


def _hidden(relative: str) -> bool:
    """Whether a file, by its path under the listed root, is hidden."""
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def _local_status(root: str) -> list[tuple[str, int]]:
    """`list_status` of a local directory (or file), following symbolic links as Hadoop does;
    times truncated to milliseconds, as Java's `File.lastModified` gives them."""
    if os.path.isfile(root):
        candidates = [root]
    else:
        candidates = []
        for folder, folders, files in os.walk(root, followlinks=True, onerror=_unreadable):
            folders[:] = [f for f in folders if not _hidden(f)]
            candidates += [os.path.join(folder, f) for f in files if not _hidden(f)]
    found = []
    for candidate in candidates:
        try:
            found.append((f"file:{candidate}", os.stat(candidate).st_mtime_ns // 1_000_000))
        except FileNotFoundError:  # removed while listed, or a dangling link
            continue
    return found


def _unreadable(error: OSError) -> None:
    """A directory the listing cannot read fails it, as Hadoop's listing would (a missing one,
    removed while listed, is skipped): its files must not silently go uningested."""
    if not isinstance(error, FileNotFoundError):
        raise error


_SEPARATOR = "\0"


def _hadoop_status(spark: SparkSession, files: Any) -> list[tuple[str, int]]:
    """Every (path, modification time) of a Hadoop `RemoteIterator[FileStatus]`, in a fixed
    number of py4j calls: the statuses are gathered into an array in the JVM, their paths
    joined into one string, and each modification time read from the status's text. Should a
    status's text not have the form Hadoop's `FileStatus.toString` gives it, each status is
    asked instead (a few calls per file)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    statuses = _statuses(spark, files)
    if len(statuses) == 0:
        return []
    joined = str(jvm.org.apache.commons.lang3.StringUtils.join(statuses, _SEPARATOR))
    paths, texts = _joined_paths(jvm, statuses), joined.split(_SEPARATOR)
    if len(paths) == len(texts) == len(statuses):
        read = [(path, _modified(path, text)) for path, text in zip(paths, texts, strict=True)]
        if all(mtime is not None for _, mtime in read):
            return [(path, mtime) for path, mtime in read if mtime is not None]
    return [(s.getPath().toString(), int(s.getModificationTime())) for s in statuses]


def _statuses(spark: SparkSession, files: Any) -> Any:
    """A `RemoteIterator[FileStatus]` gathered into a Java `Object[]` (in one call)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm.org.apache.hadoop.util.functional.RemoteIterators.toList(files).toArray()


def _modified(path: str, text: str) -> int | None:
    """A file's modification time from its status's text, or None when the text does not
    read as `...{path=<path>; ...; modification_time=<ms>; ...}`."""
    start = text.find(f"{{path={path}; ")
    match = _MODIFIED.search(text, start + len(path)) if start >= 0 else None
    return int(match.group(1)) if match else None


_MODIFIED = re.compile(r"; modification_time=(\d+)[;}]")


def _joined_paths(jvm: Any, statuses: Any) -> list[str]:
    """The statuses' paths, read back as one string. py4j does not pass a
    `Path[]` where Java takes an `Object[]`, so `StringUtils.join` is called by reflection."""
    lang = jvm.java.lang
    typed = jvm.java.util.Arrays.copyOf(
        statuses, len(statuses), lang.Class.forName("[Lorg.apache.hadoop.fs.FileStatus;")
    )
    types = lang.reflect.Array.newInstance(lang.Class.forName("java.lang.Class"), 2)
    types[0] = lang.Class.forName("[Ljava.lang.Object;")
    types[1] = lang.Class.forName("java.lang.String")
    join = lang.Class.forName("org.apache.commons.lang3.StringUtils").getMethod("join", types)
    arguments = lang.reflect.Array.newInstance(lang.Class.forName("java.lang.Object"), 2)
    arguments[0] = jvm.org.apache.hadoop.fs.FileUtil.stat2Paths(typed)
    arguments[1] = _SEPARATOR
    return str(join.invoke(None, arguments)).split(_SEPARATOR)


def list_files(spark: SparkSession, uri: str) -> list[str]:
    """Data files under a directory or prefix, recursively, sorted; hidden files skipped."""
    return [path for path, _ in list_status(spark, uri)]


def delete(spark: SparkSession, uri: str) -> None:
    fs, path = _fs(spark, uri)
    if fs.exists(path):
        fs.delete(path, True)


def literal(path: str) -> str:
    """A path read as it is, not as a glob pattern (`[`, `*`, `?` in it)."""
    return re.sub(r"([\[\]{}*?\\])", r"\\\1", path)


def delete_matching(spark: SparkSession, directory: str, prefix: str) -> list[str]:
    """Delete the files directly in `directory` whose names start with `prefix` (a glob of
    that prefix, not a listing of the directory); returns their paths."""
    fs, path = _fs(spark, join(literal(directory), f"{literal(prefix)}*"))
    found = fs.globStatus(path) or []
    deleted = [str(status.getPath().toString()) for status in found]
    for status in found:
        fs.delete(status.getPath(), False)
    return deleted


def move(spark: SparkSession, source: str, target: str) -> None:
    fs, src = _fs(spark, source)
    _, dst = _fs(spark, target)
    if fs.exists(dst):
        fs.delete(dst, False)
    if not fs.rename(src, dst):
        raise OSError(f"cannot move {source} to {target}")


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    fs, path = _fs(spark, uri)
    stream = fs.create(path, True)
    stream.write(bytearray(text.encode()))
    stream.close()


def read_text(spark: SparkSession, uri: str) -> str | None:
    """A small text file (a Delta commit), or None when it does not exist. Every relation's
    commit is read after every write, so: a local file is read by Python, any other opened
    without asking first whether it exists (on object storage, one request fewer)."""
    local = local_path(uri)
    if local is not None:
        try:
            with open(local, encoding="utf-8") as file:
                return file.read()
        except FileNotFoundError:
            return None
    fs, path = _fs(spark, uri)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        stream = fs.open(path)
        try:
            data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
    except Py4JJavaError as error:  # missing: at the open, or at the first read if it is lazy
        if semantics.lost_file(error):
            return None
        raise
    return bytes(data).decode()


LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")


def delta_version(spark: SparkSession, uri: str) -> int:
    """The latest version of a Delta table; -1 when there is none. One listing of its log (no
    Spark job: this runs for every relation on every step)."""
    local = local_path(join(uri, LOG))
    if local is not None:
        names = os.listdir(local) if os.path.isdir(local) else []
    else:
        fs, log = _fs(spark, join(uri, LOG))
        if not fs.exists(log):
            return -1
        listed = _hadoop_status(spark, fs.listFiles(log, False))
        names = [path.rsplit("/", 1)[-1] for path, _ in listed]
    versions = [int(found.group(1)) for name in names if (found := _COMMIT.match(name))]
    return max(versions, default=-1)


def commit_actions(spark: SparkSession, uri: str, version: int) -> list[dict[str, Any]] | None:
    """The actions of one commit of a Delta table, from its log entry; None when the log no
    longer holds it."""
    text = read_text(spark, join(uri, LOG, f"{version:020d}.json"))
    if text is None:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def last_commit(spark: SparkSession, uri: str) -> tuple[int, dict[str, str]]:
    """Version and operation metrics (rows written, inserted, deleted...) of the latest commit
    of a Delta table this process just wrote: read from that commit's own log entry."""
    version = delta_version(spark, uri)
    actions = commit_actions(spark, uri, version) if version >= 0 else None
    if actions is None:
        raise OSError(f"{uri} has no Delta commit to read")
    metrics = info_of(actions).get("operationMetrics") or {}
    return version, {str(k): str(v) for k, v in metrics.items()}


def commit_info(spark: SparkSession, uri: str, version: int) -> dict[str, Any]:
    """The `commitInfo` of one commit of a Delta table (its operation, its parameters, the
    version it read); empty when the log no longer holds that commit."""
    return info_of(commit_actions(spark, uri, version) or [])


def info_of(actions: list[dict[str, Any]]) -> dict[str, Any]:
    """The `commitInfo` of a commit's actions (`commit_actions`); empty if it has none."""
    return next((dict(a["commitInfo"]) for a in actions if "commitInfo" in a), {})


def last_write(spark: SparkSession, uri: str) -> tuple[int, int]:
    """Version and row count written by the latest commit of a Delta table (from its log)."""
    version, metrics = last_commit(spark, uri)
    return version, int(metrics.get("numOutputRows", 0))


def read_delta(spark: SparkSession, uri: str, version: int, schema: StructType) -> DataFrame:
    if version < 0:
        return spark.createDataFrame([], schema)
    return spark.read.format("delta").option("versionAsOf", version).load(uri)


USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def restore(spark: SparkSession, uri: str, version: int, *, note: str | None = None) -> bool:
    """Roll a Delta table back to `version` if a crashed step wrote past it; `note` is the
    RESTORE commit's `userMetadata` (Delta takes it from the session's settings only)."""
    from delta.tables import DeltaTable

    if version < 0 or delta_version(spark, uri) <= version:
        return False
    if note is None:
        DeltaTable.forPath(spark, uri).restoreToVersion(version)
        return True
    before = spark.conf.get(USER_METADATA, None)  # the pipeline's own, if it set one
    spark.conf.set(USER_METADATA, note)  # no other write runs meanwhile: discards come first
    try:
        DeltaTable.forPath(spark, uri).restoreToVersion(version)
    finally:
        if before is None:
            spark.conf.unset(USER_METADATA)
        else:
            spark.conf.set(USER_METADATA, before)
    return True
