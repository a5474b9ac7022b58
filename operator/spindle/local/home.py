"""The local home directory (`--home`, default `~/.spindle`): applied pipelines and their runs.

pipelines/<name>/pipeline.json   the applied manifest, its generation, the last bootstrap
pipelines/<name>/approval        the approved change id
pipelines/<name>/restate         a restatement request (`spindle local restate`)
pipelines/<name>/driver.json     the last run's mode, generation, phase and failure reason
pipelines/<name>/run.pid         the PID of a running `spindle local run`
pipelines/<name>/status.json     the last status recorded (the operator's `.status` shape)
storage/                         default checkpoint and state storage (file://)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spindle.api import PipelineManifest
from spindle.api.status import PipelineStatus
from spindle.checkpoint import PipelineRef
from spindle.checkpoint.objects import S3Options, file_uri
from spindle.checkpoint.store import CheckpointStore, open_store, pipeline_root
from spindle.errors import SpindleError
from spindle.lifecycle import DriverMode, ObservedDriver
from spindle.local.warm import alive, home_problem, started


def default_home() -> Path:
    """`$SPINDLE_HOME`, else `~/.spindle`. An empty `SPINDLE_HOME` is unset, as it is to the
    client that picks the home's server (`cli.warm_client.home_of`), never the current
    directory."""
    return Path(os.environ.get("SPINDLE_HOME") or Path.home() / ".spindle").expanduser()


def home_path(given: str | None) -> Path:
    """The home a command names (`--home`), else the default, read when the command runs (a
    warm server's parser serves many commands, each with its own environment); `InvalidHome`
    when it cannot be a directory."""
    home = Path(given).expanduser() if given else default_home()
    problem = home_problem(home)
    if problem is not None:
        raise SpindleError(reason="InvalidHome", message=problem, details={"home": str(home)})
    return home


def _write_atomic(path: Path, text: str) -> None:
    """Write `path` whole: a temporary file of this process and thread, renamed over it (two
    commands writing the same status at once each rename a file of their own)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_text(text)
        temp.replace(path)
    except OSError as error:  # a home under /proc, a read-only disk, one full, no permission
        raise _unwritable(path, error) from None


def _unwritable(path: Path, error: OSError) -> SpindleError:
    return SpindleError(
        reason="InvalidHome",
        message=f"Spindle cannot write its local state to {path}: "
        f"{error.strerror or error}. Name a directory you may write with --home (or "
        "$SPINDLE_HOME), or free space on its disk.",
        details={"file": str(path)},
    )


RECORD_REMEDY = (
    "Restore the file from a backup, or remove {directory} and apply the manifest again "
    "(`spindle local apply -f pipeline.yaml`). Removing it loses the pipeline's generation, "
    "approval, restatement request and last run's outcome (a pending change must be approved "
    "again); its checkpoints and stored state, which live in its storage, are kept, and it "
    "resumes from the latest checkpoint."
)
"""What to do about a damaged `pipeline.json`."""
DRIVER_REMEDY = (
    "Remove the file: that loses only how the last run ended (a failure's reason), not the "
    "pipeline, its checkpoints or its state."
)
"""What to do about a damaged `driver.json`."""


@dataclass(frozen=True)
class LocalPipeline:
    home: Path
    name: str

    @property
    def directory(self) -> Path:
        return self.home / "pipelines" / self.name

    @property
    def ref(self) -> PipelineRef:
        return PipelineRef(namespace=self.manifest().metadata.namespace, name=self.name)

    def exists(self) -> bool:
        return (self.directory / "pipeline.json").exists()

    def record(self) -> dict[str, Any]:
        path = self.directory / "pipeline.json"
        if not path.exists():
            raise SpindleError(
                reason="PipelineNotFound",
                message=f"No pipeline '{self.name}' under {self.home}; apply one with "
                "`spindle local apply -f pipeline.yaml`.",
                details={"name": self.name, "home": str(self.home)},
            )
        record = self._json(path, RECORD_REMEDY)
        if not isinstance(record.get("manifest"), dict):
            raise self._unreadable(path, "it holds no applied manifest", RECORD_REMEDY)
        generation = record.get("generation")
        if not isinstance(generation, int) or isinstance(generation, bool):
            problem = f"its generation is {generation!r}, not a number"
            raise self._unreadable(path, problem, RECORD_REMEDY)
        return record

    def _json(self, path: Path, remedy: str) -> dict[str, Any]:
        """The JSON object in one of the pipeline's files, else `LocalStateUnreadable`."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:  # truncated, not JSON, not UTF-8, unreadable
            raise self._unreadable(path, f"{type(error).__name__}: {error}", remedy) from None
        if not isinstance(data, dict):
            problem = f"it holds a JSON {type(data).__name__}, not an object"
            raise self._unreadable(path, problem, remedy)
        return data

    def _unreadable(self, path: Path, problem: str, remedy: str) -> SpindleError:
        """`LocalStateUnreadable`: one of the pipeline's files, damaged outside Spindle (which
        writes each whole, `_write_atomic`), and what to do (`remedy`, which may name the
        pipeline's `{directory}`)."""
        return SpindleError(
            reason="LocalStateUnreadable",
            message=f"Cannot read {path}, which records pipeline '{self.name}' under the home: "
            f"{problem}. {remedy.format(directory=self.directory)}",
            details={"name": self.name, "path": str(path)},
        )

    def manifest(self) -> PipelineManifest:
        try:
            return PipelineManifest.model_validate(self.record()["manifest"])
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "manifest"
            problem = f"its manifest is not valid ({where}: {first['msg']})"
            path = self.directory / "pipeline.json"
            raise self._unreadable(path, problem, RECORD_REMEDY) from None

    @property
    def generation(self) -> int:
        return int(self.record()["generation"])

    @contextlib.contextmanager
    def _recording(self) -> Iterator[None]:
        """Hold the lock of `pipeline.json` (`record.lock`, an exclusive `flock`) while the
        block reads, changes and writes it back: two applies at once each read the same
        generation, and the first's manifest was lost without a word; a run recording its
        bootstrap could drop an apply alike."""
        descriptor = self._lock_file("record.lock")
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)

    def _lock_file(self, name: str) -> int:
        """Open (creating it and the pipeline's directory) the lock file `name`."""
        path = self.directory / name
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise _unwritable(path, error) from None

    def save(self, manifest: PipelineManifest) -> int:
        """Record the manifest; the generation grows when the spec changes."""
        with self._recording():
            return self._save(manifest)

    def _save(self, manifest: PipelineManifest) -> int:
        document = manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
        previous = self.record() if self.exists() else None
        generation = 1
        namespace = manifest.metadata.namespace
        was = ((previous or {}).get("manifest", {}).get("metadata") or {}).get("namespace")
        was = was or "default"
        if previous is not None and was != namespace:
            raise SpindleError(
                reason="PipelineNamespaceChanged",
                message=f"Pipeline '{self.name}' under {self.home} is in namespace '{was}', and "
                f"this manifest names '{namespace}': its checkpoints live under the namespace, "
                "so applying it would leave them behind. A home keeps one pipeline per name: "
                "apply it under another --home, or give it another metadata.name.",
                details={"namespace": was, "applied": namespace},
            )
        if previous is not None:
            generation = int(previous["generation"])
            if previous["manifest"].get("spec") != document.get("spec"):
                generation += 1
        record = {**(previous or {}), "manifest": document, "generation": generation}
        _write_atomic(self.directory / "pipeline.json", json.dumps(record, indent=2))
        return generation

    def update(self, **fields: Any) -> None:
        with self._recording():
            record = self.record()
            record.update(fields)
            _write_atomic(self.directory / "pipeline.json", json.dumps(record, indent=2))

    # approval --------------------------------------------------------------------------------

    @property
    def approval(self) -> str | None:
        path = self.directory / "approval"
        return path.read_text().strip() if path.exists() else None

    def approve(self, change_id: str) -> None:
        _write_atomic(self.directory / "approval", change_id + "\n")

    @property
    def restate(self) -> str | None:
        path = self.directory / "restate"
        return path.read_text().strip() or None if path.exists() else None

    def request_restate(self, request: str | None) -> None:
        """Record a restatement request (None: withdraw it)."""
        path = self.directory / "restate"
        if request is None:
            path.unlink(missing_ok=True)
        else:
            _write_atomic(path, request + "\n")

    # the driver (a `spindle local run` process) ------------------------------------------------

    def running_pid(self) -> int | None:
        """The PID of the run of this pipeline, if one runs: `run.pid` names a live process
        that started when the run did (after a reboot or `kill -9`, its PID may name another
        process, which is neither reported nor stopped)."""
        path = self.directory / "run.pid"
        if not path.exists():
            return None
        try:
            pid_text, _, start = path.read_text().strip().partition(" ")
            pid = int(pid_text)
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError, PermissionError):
            return None
        now = started(pid)
        if start and now is not None and now != start:
            return None
        # a zombie is not running: a killed warm server nobody reaped yet (its client left)
        return pid if alive(pid) else None

    def mark_running(self) -> None:
        pid = os.getpid()
        _write_atomic(self.directory / "run.pid", f"{pid} {started(pid) or ''}".strip())

    @contextlib.contextmanager
    def running_lock(self) -> Iterator[None]:
        """Hold this pipeline's run lock (`run.lock`, an exclusive `flock` the system drops
        with the process) while the block runs: `AlreadyRunning` when another run holds it.
        Two runs started together both found no `run.pid` before either wrote one."""
        descriptor = self._lock_file("run.lock")
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = self.running_pid()
                raise SpindleError(
                    reason="AlreadyRunning",
                    message=f"Pipeline '{self.name}' is already running"
                    + (f" (PID {pid})" if pid is not None else "")
                    + f"; stop it with `spindle local stop {self.name}`.",
                ) from None
            yield
        finally:
            os.close(descriptor)

    def clear_running(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.directory / "run.pid").unlink()

    def driver(self) -> ObservedDriver | None:
        path = self.directory / "driver.json"
        if not path.exists():
            return None
        data = self._json(path, DRIVER_REMEDY)
        phase = data.get("phase", "Succeeded")
        if phase in ("Pending", "Running") and self.running_pid() is None:
            phase = "Succeeded"  # the process is gone: it stopped (or was killed)
        return ObservedDriver(
            mode=DriverMode(data.get("mode", DriverMode.RUN)),
            generation=int(data.get("generation", 0)),
            phase=phase,
            change_id=data.get("change_id"),
            reason=data.get("reason"),
            message=data.get("message"),
            retrying=data.get("retrying"),
            base=data.get("base"),
        )

    def set_driver(self, **fields: Any) -> None:
        _write_atomic(self.directory / "driver.json", json.dumps(fields, indent=2))

    # status ----------------------------------------------------------------------------------

    def status(self) -> PipelineStatus | None:
        """The status recorded last, if it is still readable."""
        path = self.directory / "status.json"
        try:
            return PipelineStatus.model_validate_json(path.read_text())
        except (OSError, ValueError):
            return None

    def save_status(self, body: dict[str, Any]) -> None:
        _write_atomic(self.directory / "status.json", json.dumps(body, indent=2))

    # storage ---------------------------------------------------------------------------------

    def storage_root(self) -> tuple[str, S3Options | None]:
        manifest = self.manifest()
        storage = manifest.spec.storage
        namespace = manifest.metadata.namespace
        if storage is None:
            base = file_uri(str((self.home / "storage").resolve()))
            return pipeline_root(base, namespace=namespace, name=self.name), None
        root = pipeline_root(storage.uri, namespace=namespace, name=self.name)
        if storage.uri.startswith("s3://"):
            options = S3Options.from_env().located(endpoint=storage.endpoint, region=storage.region)
            return root, options
        return root, None

    def store(self) -> CheckpointStore:
        root, options = self.storage_root()
        return open_store(root, s3=options)
