"""The SparkSession Spindle runs on: local mode or Kubernetes, with Delta Lake and S3A.

Jars come from the cache (`spindle.runtime.jars`) or, in the Spark image, from
`$SPINDLE_SPARK_JARS`. S3 settings are the checkpoint store's `S3Options` (arguments or the
standard AWS environment variables), never files in the image.

On Kubernetes (a `k8s://` master) executors start from the pod template the operator hands
the driver (`$SPINDLE_EXECUTOR_POD_TEMPLATE`), and the session is returned only once its
executors have registered: executors that cannot start (an image that cannot be pulled,
resources no node has) end the driver with `ExecutorsNotStarted` instead of a silent hang.

In the local warm server (`share_sessions()`), one SparkContext serves every command: each
gets a new session on it (its own temporary views and SQL settings), and a command whose
settings differ (another storage, S3 endpoint or `spec.spark.conf`) replaces the context,
so every command runs on exactly the settings a fresh process would give it, but for those the
JVM fixes once for its life: `spark.sql.codegen.cache.maxEntries` in `spec.spark.conf` takes
effect in a fresh process (`--no-server`, a driver pod), not in a server already running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from spindle.checkpoint.objects import S3Options
from spindle.errors import SpindleError
from spindle.progress import say as _say
from spindle.runtime import class_archive, compaction
from spindle.runtime.jars import ensure_jars

EXECUTOR_TEMPLATE_ENV = "SPINDLE_EXECUTOR_POD_TEMPLATE"
EXECUTOR_START_TIMEOUT = "spindle.executors.startTimeoutSeconds"
"""Spindle's own setting in `spec.spark.conf`: how long to wait for executors (default 180)."""
FILE_SYSTEM_CHECKPOINTS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
"""How Delta writes each version's checksum file on local storage: through the FileSystem API,
whose renames start no process (see `spark_conf`)."""
CODEGEN_CACHE_ENTRIES = 1000
"""Compiled classes Spark keeps (`spark.sql.codegen.cache.maxEntries`, default 100): enough
for the change queries of a pipeline of about 30 relations, so a step compiles only code it
has not seen (`spec.spark.conf` may set another, for a new JVM: see above)."""


QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
"""PySpark's loggers that print an analysis error's whole Java stack trace to stderr when it
is raised; Spindle says every such error itself, as its reason and Spark's first line."""


def _interrupt_trace(record: logging.LogRecord) -> bool:
    """False for py4j's line about a Ctrl-C that reached it mid-command: it logs the
    interruption, with a traceback, through the root logger, before the command ends as an
    interrupted one (exit 130)."""
    return "KeyboardInterrupt while sending command" not in record.getMessage()


def _quiet_query_context() -> None:
    for name in QUERY_CONTEXT_LOGGERS:  # PySpark's own class: it logs with extra arguments
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    root = logging.getLogger()
    if _interrupt_trace not in root.filters:
        root.addFilter(_interrupt_trace)


JAVA_OPTIONS = "SPINDLE_JAVA_OPTIONS"
"""Extra options of the JVM of a session this process starts, after Spindle's own (a
Pipeline's driver takes its own from `spark.driver.extraJavaOptions` in `spec.spark.conf`)."""

WAREHOUSE = Path(tempfile.gettempdir()) / f"spindle-spark-warehouse-{os.getuid()}"
"""Spark's warehouse directory: empty, out of the working directory."""


def _class_path() -> str:
    """Jars on the JVM class path directly: unlike `spark.jars`, nothing is copied per session
    (the AWS SDK bundle alone is 600 MB). The Spark image sets SPINDLE_SPARK_JARS."""
    preset = os.environ.get("SPINDLE_SPARK_JARS")
    if preset:
        return preset.replace(",", ":")
    return ":".join(str(p) for p in ensure_jars())


def spark_conf(*, s3: S3Options | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    conf = {
        "spark.driver.extraClassPath": _class_path(),
        "spark.executor.extraClassPath": _class_path(),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Spindle keeps no catalog tables, but Spark creates its warehouse directory (by
        # default `spark-warehouse/` in the working directory: a user's project, or a driver
        # pod's root) when a query looks a name up in the catalog, as an unknown function does.
        "spark.sql.warehouse.dir": WAREHOUSE.as_uri(),
        # small machines: the serial GC. Not C1 only: a driver runs for hours, and planning the
        # change queries of every step is ~30% slower without C2 (measured on the oracle test).
        # Sessions of a few steps spend less CPU with C1 only: `$SPINDLE_JAVA_OPTIONS` (the
        # test suite's `-XX:TieredStopAtLevel=1`) adds to these.
        "spark.driver.extraJavaOptions": " ".join(
            ("-Duser.timezone=UTC -XX:+UseSerialGC", *os.environ.get(JAVA_OPTIONS, "").split())
        ),
        "spark.databricks.delta.snapshotPartitions": "2",
        # Delta's data skipping (per-file min/max) prunes nothing a step reads: state is read
        # whole or joined by key, and a step's file holds rows of any key, so a query's filter
        # rarely skips one either. Planning each read still ran a Spark job over the table's
        # file statistics: most of a steady step's planning time.
        "spark.databricks.delta.stats.skipping": "false",
        # Spindle reads exact older versions (a retained checkpoint's state, a rollback's
        # RESTORE) and deletes their files itself (`runtime.vacuum`), so they stay readable
        # whatever their age. Delta refused to read any version but the latest whose commit
        # was older than its deleted-file retention (7 days): a pipeline whose kept
        # checkpoints spanned a week could neither restart from them nor roll a step back.
        "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration": (
            "false"
        ),
        "spark.sql.ansi.enabled": "false",
        # A driver runs steps for weeks, and Spark's status store keeps every job, stage and
        # SQL execution up to these counts (1,000 each by default): with tens of each per step
        # that was hundreds of MB of a 1 GB heap, and the collector's time grew with it. The UI
        # that would show them is off.
        "spark.ui.retainedJobs": "50",
        "spark.ui.retainedStages": "50",
        "spark.ui.retainedTasks": "1000",
        "spark.sql.ui.retainedExecutions": "50",
        # Caching a frame (every step caches its changes) cloned the session whenever either of
        # these was on, the clone copying every temporary view; a pool thread Spark started
        # meanwhile inherited the clone as its active session and kept it, its views and the
        # Delta snapshots they read, forever: 3 sessions and 4 snapshots more each step. Off,
        # the session is used as is (Spindle has no bucketed tables; a cached frame may keep
        # its partitioning).
        "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
        # Every step plans the same change queries again, and Spark compiles the Java code it
        # generates for them unless that code is in its cache of compiled classes. The default
        # cache (100 classes) is smaller than one step's queries (bench/steady.py's pipeline,
        # 2 tables and 3 views: about 140), so most were evicted before the next step used
        # them: about 70 compilations a step. With 1,000, a step compiles about 3
        # (bench/settings.py codegen). A full cache costs tens of MB: an entry's source and bytecode
        # (about 20-40 KB of heap) and its loaded classes (about as much metaspace).
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        # On a local directory, Hadoop's file system (without its native library, which no
        # Maven artifact carries) starts a `readlink` process to check each side of a rename
        # made through its FileContext API. Delta's default log store for `file:` commits
        # every version that way (four processes a commit), and Spark's default checkpoint
        # file manager writes each version's checksum file that way: about 135 processes a
        # step of bench/steady.py's pipeline, half of all it started. Delta's LocalLogStore
        # renames through the FileSystem API, which starts none. It is no less safe: neither
        # makes a rename exclusive between processes on a local disk (both check, then
        # rename), and a pipeline has one driver (its checkpoint commit is the exclusive
        # step). A step took 0.92x (bench/settings.py local-commits).
        "spark.delta.logStore.file.impl": "io.delta.storage.LocalLogStore",
        **compaction.CONF,
    }
    if s3 is None:  # S3A's renames start no process, and its settings stay as they were
        conf["spark.sql.streaming.checkpointFileManagerClass"] = FILE_SYSTEM_CHECKPOINTS
    else:
        prefix = "spark.hadoop.fs.s3a."
        conf.update(
            {
                f"{prefix}impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
                f"{prefix}path.style.access": "true",
                f"{prefix}connection.ssl.enabled": "false"
                if (s3.endpoint or "").startswith("http://")
                else "true",
                # Delta's S3 log store needs single-writer semantics per table; Spindle has one
                # driver per pipeline, which is what S3SingleDriverLogStore assumes.
                "spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore",
            }
        )
        if s3.endpoint:
            conf[f"{prefix}endpoint"] = s3.endpoint
        if s3.region:
            conf[f"{prefix}endpoint.region"] = s3.region
        if s3.access_key and s3.secret_key:
            conf[f"{prefix}access.key"] = s3.access_key
            conf[f"{prefix}secret.key"] = s3.secret_key
            conf[f"{prefix}aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            )
            if s3.session_token:  # temporary credentials
                conf[f"{prefix}session.token"] = s3.session_token
                conf[f"{prefix}aws.credentials.provider"] = (
                    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
                )
    conf.update(extra or {})
    return conf


def _executor_template() -> dict[str, str]:
    text = os.environ.get(EXECUTOR_TEMPLATE_ENV)
    if not text:
        return {}
    path = Path(tempfile.mkdtemp(prefix="spindle-")) / "executor-pod.json"
    path.write_text(text)  # JSON is YAML: Spark reads it as a pod template
    return {
        "spark.kubernetes.executor.podTemplateFile": str(path),
        "spark.kubernetes.executor.podTemplateContainerName": "executor",
    }


def registered_executors(session: SparkSession) -> int:
    """Executors registered with the driver right now (the driver itself not counted)."""
    jvm_context = session.sparkContext._jsc.sc()
    return int(jvm_context.getExecutorMemoryStatus().size()) - 1


def await_executors(session: SparkSession, *, expected: int, timeout: float) -> int:
    """Wait until `expected` executors registered; after `timeout`, go on with those there
    are, or fail with `ExecutorsNotStarted` when there are none."""
    deadline = time.monotonic() + timeout
    while (count := registered_executors(session)) < expected and time.monotonic() < deadline:
        time.sleep(1.0)
    if count == 0:
        session.stop()
        raise SpindleError(
            reason="ExecutorsNotStarted",
            message=f"No Spark executor registered within {timeout:.0f} s. See why with "
            "`kubectl get pods -l spark-role=executor` and `kubectl get events` in the "
            "pipeline's namespace (usually an image the nodes cannot pull, or "
            "spec.spark.executor resources that no node has), fix the spec and apply again.",
        )
    return count


@dataclass
class _Shared:
    """The one SparkContext of the warm server, and the settings it was started with."""

    enabled: bool = False
    settings: tuple[tuple[str, str], ...] = ()
    base: SparkSession | None = None


_SHARED = _Shared()


def share_sessions() -> None:
    """From now on this process keeps its SparkContext between `spark_session` calls."""
    _SHARED.enabled = True


def stop_shared() -> None:
    """Stop the shared SparkContext, if one was started."""
    if _SHARED.base is not None:
        _SHARED.base.stop()
        _SHARED.base = None


def cancel_shared() -> None:
    """Cancel the Spark jobs running on the shared SparkContext (the server runs one command
    at a time: they are that command's)."""
    if _SHARED.base is not None:
        _SHARED.base.sparkContext.cancelAllJobs()


def _shared_session(app: str, settings: dict[str, str]) -> SparkSession:
    key = tuple(sorted(settings.items()))
    if _SHARED.base is not None and key != _SHARED.settings:
        stop_shared()
    if _SHARED.base is None:
        _SHARED.base = _started({"spark.app.name": app, **settings})
        _SHARED.settings = key
        _SHARED.base.sparkContext.setLogLevel("WARN")
    return _SHARED.base.newSession()


LOCAL_LOG = (Path(__file__).parent / "log4j2-local.properties").as_uri()
"""The log profile of a local-mode driver: warnings, without the start-up lines Spark's own
profile prints ("Using Spark's default log4j profile", "Setting default log level", the native
library) that a user of `spindle local run` read at every start."""
LOOPBACK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
"""Where a local-mode driver listens: the loopback only. Spark took the address the machine's
name resolves to, or its first interface's when that is a loopback one ("Your hostname
resolves to a loopback address ... using 192.0.2.2 instead"), and said so on every start."""


def running() -> bool:
    """Whether this process runs a SparkContext that the next `spark_session` uses (the warm
    server's: unless that command's settings differ, which restarts it), so it starts none."""
    if _SHARED.enabled:
        return _SHARED.base is not None
    return SparkContext._active_spark_context is not None


HELD_INTERRUPT = (
    "stopping once Spark has started (stopping it while it starts would leave its JVM running)"
)


def _started(options: dict[str, str]) -> SparkSession:
    """A session of these settings (`spark.master`, `spark.app.name` and the rest), Ctrl-C held
    until Spark has started. PySpark starts the JVM, then polls for the file the JVM writes
    its port to: a Ctrl-C in that wait removed the file's directory, the JVM's main thread died
    on it (a Java stack trace) before it began watching its standard input, which ends it with
    this process, and its py4j server thread kept it running for good. On the main thread, a
    Ctrl-C while Spark starts is said and noted; once Spark has started, it is stopped and the
    Ctrl-C raised (`KeyboardInterrupt`), where the command's own Ctrl-C would have been. The
    handler PySpark installs once its context has started (it cancels the running jobs from
    inside the call that waits for them: py4j's "reentrant call" traceback) is replaced by the
    one there was before, as soon as the context has started."""
    conf = SparkConf().setAll(list(options.items()))
    if threading.current_thread() is not threading.main_thread():  # signals are the main's
        return SparkSession.builder.config(conf=conf).getOrCreate()
    heard: list[int] = []

    def hold(number: int, _: object) -> None:
        if not heard:  # a thread says it: printing here could re-enter a write it interrupted
            threading.Thread(target=_say, args=(HELD_INTERRUPT,), daemon=True).start()
        heard.append(number)

    starts = (SparkContext._active_spark_context is None, SparkContext._gateway is None)
    previous = signal.signal(signal.SIGINT, hold)
    try:
        SparkContext.getOrCreate(conf)  # the JVM and the context, which sets PySpark's handler
        signal.signal(signal.SIGINT, hold)
        session = SparkSession.builder.config(conf=conf).getOrCreate()  # on that context
    except KeyboardInterrupt:  # PySpark's handler, in the instant it was set
        _stop_started(*starts)
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if heard:
        _stop_started(*starts)
        raise KeyboardInterrupt
    return session


JVM_EXIT_TIMEOUT = 30.0


def _stop_started(context: bool, jvm: bool) -> None:
    """Stop what `_started` started: the SparkContext, and its JVM now (it would end with this
    process, its standard input closing), so none is left when the interrupted command ends."""
    started = SparkSession._instantiatedSession or SparkContext._active_spark_context
    if context and started is not None:
        with contextlib.suppress(Exception):  # a command Ctrl-C cut off: the JVM ends anyway
            started.stop()
    if not jvm:
        return
    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    process = getattr(gateway, "proc", None)  # None: a JVM this process did not start
    if process is not None:
        process.stdin.close()
        try:
            process.wait(timeout=JVM_EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ensure_class_archive() -> bool:
    """Make the class archive of a default session on this machine unless it is there (the
    test harness and the Spark image's build do, so no start spends its time on it); whether
    it is there now."""
    path = class_archive.archive_path(_class_path().split(":"))
    return path is not None and class_archive.ensure(path, say=_say)


def spark_session(
    *,
    app: str = "spindle",
    master: str = "local[2]",
    s3: S3Options | None = None,
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    _quiet_query_context()
    settings = dict(extra or {})
    timeout = float(settings.pop(EXECUTOR_START_TIMEOUT, "180"))
    on_kubernetes = master.startswith("k8s://")
    if on_kubernetes:
        settings = {**_executor_template(), **settings}
    local = master.startswith("local")
    if local:
        settings = {**LOOPBACK, **settings}
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM's own lookup, at start
    conf = spark_conf(s3=s3, extra=settings)
    options = [conf.get("spark.driver.extraJavaOptions", "")]
    if local:  # a local-mode driver's log (a driver pod's of one too), beside its JVM options
        options.append(f"-Dlog4j2.configurationFile={LOCAL_LOG}")
    class_path = _class_path()
    if conf["spark.driver.extraClassPath"] == class_path:  # the class path it was made for
        options.append(class_archive.java_options(class_path.split(":"), say=_say))
    conf["spark.driver.extraJavaOptions"] = " ".join(o for o in options if o)
    if _SHARED.enabled and not on_kubernetes:
        return _shared_session(app, {"spark.master": master, **conf})
    session = _started({"spark.master": master, "spark.app.name": app, **conf})
    session.sparkContext.setLogLevel("WARN")
    if on_kubernetes:
        expected = int(session.conf.get("spark.executor.instances", "2") or "2")
        await_executors(session, expected=expected, timeout=timeout)
    return session
