"""The test node agent: plays scheduler and kubelet for pods, running containers as processes.

It registers a Ready Node, binds pending pods to it, starts each pod's first container command
(mapped from its image by `images.py`) as a local process in a per-pod directory with the
container's environment (`valueFrom` fieldRef, secretKeyRef, configMapKeyRef; `envFrom`), captures
its logs, and reports status Pending → Running → Succeeded/Failed with exit codes and podIP
127.0.0.1. On deletion it sends SIGTERM to the main process (as a container runtime does), waits
the grace period, then SIGKILLs the process group and removes the pod.
It is level-based: every tick it lists pods and reconciles them, so it never misses an event.
Restart policies are not implemented: a container runs once (Spindle's driver pods use Never).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.harness import images

NODE_NAME = "spindle-test-node"
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "JAVA_HOME", "SPINDLE_CACHE", "TMPDIR", "GOPATH")


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion in command and args; `$$(VAR)` escapes it."""

    def one(match: re.Match[str]) -> str:
        if match.group(0).startswith("$$"):
            return match.group(0)[1:]
        return env.get(match.group(1), match.group(0))

    return re.sub(r"\$?\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def termination_message(log: Path) -> str:
    """`FallbackToLogsOnError`: the last 80 lines, at most 2048 bytes, of the container log."""
    if not log.exists():
        return ""
    tail = b"\n".join(log.read_bytes().splitlines()[-80:])[-2048:]
    return tail.decode(errors="replace")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ConfigError(Exception):
    """Like the kubelet's CreateContainerConfigError: the pod waits until it is resolvable."""


@dataclass
class PodProcess:
    namespace: str
    name: str
    uid: str
    process: subprocess.Popen[bytes] | None
    log: Path
    started: str
    terminating_since: float | None = None
    grace: float = 30.0
    finished: bool = False


@dataclass
class NodeAgent:
    kubeconfig: Path
    workdir: Path
    node_name: str = NODE_NAME
    tick: float = 0.25
    pods: dict[str, PodProcess] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        api = config.new_client_from_config(str(self.kubeconfig))
        self.core = client.CoreV1Api(api)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> NodeAgent:
        self._register_node()
        self._thread = threading.Thread(target=self._run, name="node-agent", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(10)
        for pod in self.pods.values():
            if pod.process and pod.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pod.process.pid, signal.SIGKILL)
                pod.process.wait()

    def logs(self, namespace: str, name: str) -> str:
        found = [p for p in self.pods.values() if (p.namespace, p.name) == (namespace, name)]
        return "".join(p.log.read_text(errors="replace") for p in found if p.log.exists())

    def all_logs(self) -> dict[str, str]:
        return {
            f"{p.namespace}/{p.name}": p.log.read_text(errors="replace")
            for p in self.pods.values()
            if p.log.exists()
        }

    def _register_node(self) -> None:
        body = client.V1Node(
            metadata=client.V1ObjectMeta(
                name=self.node_name, labels={"kubernetes.io/hostname": self.node_name}
            )
        )
        with contextlib.suppress(ApiException):
            self.core.create_node(body)
        self._heartbeat()

    def _heartbeat(self) -> None:
        now = _now()
        self.core.patch_node_status(
            self.node_name,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "spindle test node agent is ready",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": self.node_name},
                    ],
                    "capacity": {"cpu": "2", "memory": "24Gi", "pods": "500"},
                    "allocatable": {"cpu": "2", "memory": "24Gi", "pods": "500"},
                }
            },
        )

    # -- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        last_heartbeat = time.monotonic()
        while not self._stop.is_set():
            try:
                for pod in self.core.list_pod_for_all_namespaces().items:
                    self._reconcile(pod)
                self._reap()
                if time.monotonic() - last_heartbeat > 10:
                    self._heartbeat()
                    last_heartbeat = time.monotonic()
            except Exception as error:  # keep serving; record for the tests
                self.errors.append(repr(error))
            self._stop.wait(self.tick)

    def _reconcile(self, pod: Any) -> None:
        meta, spec = pod.metadata, pod.spec
        if spec.node_name is None:
            if meta.deletion_timestamp is None:
                self._bind(pod)
            return
        if spec.node_name != self.node_name:
            return
        running = self.pods.get(meta.uid)
        if meta.deletion_timestamp is not None:
            self._terminate(pod, running)
            return
        if running is None and pod.status.phase in (None, "Pending"):
            self._launch(pod)

    def _bind(self, pod: Any) -> None:
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.metadata.name),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=self.node_name),
        )
        with contextlib.suppress(ApiException):
            self.core.create_namespaced_pod_binding(
                pod.metadata.name, pod.metadata.namespace, body, _preload_content=False
            )

    # -- starting ----------------------------------------------------------------------------

    def _secret_value(self, namespace: str, name: str, key: str, optional: bool) -> str | None:
        try:
            secret = self.core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            if error.status == 404 and not optional:
                raise ConfigError(f'secret "{name}" not found') from None
            if error.status == 404:
                return None
            raise
        data = secret.data or {}
        if key not in data:
            if optional:
                return None
            raise ConfigError(f"couldn't find key {key} in Secret {namespace}/{name}")
        return base64.b64decode(data[key]).decode()

    def _config_value(self, namespace: str, name: str, key: str, optional: bool) -> str | None:
        try:
            data = self.core.read_namespaced_config_map(name, namespace).data or {}
        except ApiException as error:
            if error.status == 404 and optional:
                return None
            if error.status == 404:
                raise ConfigError(f'configmap "{name}" not found') from None
            raise
        if key not in data and not optional:
            raise ConfigError(f"couldn't find key {key} in ConfigMap {namespace}/{name}")
        return data.get(key)

    def _environment(self, pod: Any, container: Any) -> dict[str, str]:
        env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
        namespace = pod.metadata.namespace
        for source in container.env_from or []:
            if source.secret_ref is not None:
                try:
                    secret = self.core.read_namespaced_secret(source.secret_ref.name, namespace)
                except ApiException as error:
                    if error.status == 404 and not source.secret_ref.optional:
                        raise ConfigError(f'secret "{source.secret_ref.name}" not found') from None
                    continue
                for key, value in (secret.data or {}).items():
                    env[f"{source.prefix or ''}{key}"] = base64.b64decode(value).decode()
            if source.config_map_ref is not None:
                with contextlib.suppress(ApiException):
                    data = self.core.read_namespaced_config_map(
                        source.config_map_ref.name, namespace
                    ).data
                    env.update({f"{source.prefix or ''}{k}": v for k, v in (data or {}).items()})
        fields = {
            "metadata.name": pod.metadata.name,
            "metadata.namespace": namespace,
            "metadata.uid": pod.metadata.uid,
            "status.podIP": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
            "spec.nodeName": self.node_name,
            "spec.serviceAccountName": pod.spec.service_account_name or "default",
        }
        for var in container.env or []:
            value: str | None = var.value
            source = var.value_from
            if source is not None:
                if source.field_ref is not None:
                    value = fields.get(source.field_ref.field_path)
                    if value is None:
                        raise ConfigError(f"unsupported fieldRef {source.field_ref.field_path}")
                elif source.secret_key_ref is not None:
                    ref = source.secret_key_ref
                    value = self._secret_value(namespace, ref.name, ref.key, bool(ref.optional))
                elif source.config_map_key_ref is not None:
                    ref = source.config_map_key_ref
                    value = self._config_value(namespace, ref.name, ref.key, bool(ref.optional))
            if value is not None:
                env[var.name] = value
        return env

    def _launch(self, pod: Any) -> None:
        meta = pod.metadata
        container = pod.spec.containers[0]
        try:
            env = self._environment(pod, container)
        except ConfigError as error:
            self._waiting(pod, container, "CreateContainerConfigError", str(error))
            return
        argv = [expand(a, env) for a in [*(container.command or []), *(container.args or [])]]
        try:
            command = images.command_for(container.image, argv)
        except images.ImageNotMapped as error:
            self._fail(pod, container, "ImageNotMapped", str(error))
            return
        directory = self.workdir / "pods" / meta.namespace / f"{meta.name}-{meta.uid[:8]}"
        directory.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(directory)
        log = directory / "container.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                command,
                cwd=directory,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        started = _now()
        grace = pod.spec.termination_grace_period_seconds
        self.pods[meta.uid] = PodProcess(
            meta.namespace,
            meta.name,
            meta.uid,
            process,
            log,
            started,
            grace=float(30 if grace is None else grace),
        )
        self._status(
            pod,
            "Running",
            container,
            {"running": {"startedAt": started}},
            ready=True,
        )

    # -- status ----------------------------------------------------------------------------

    def _status(
        self,
        pod: Any,
        phase: str,
        container: Any,
        state: dict[str, Any],
        *,
        ready: bool = False,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        now = _now()
        status: dict[str, Any] = {
            "phase": phase,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": now,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {
                    "type": "ContainersReady",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": now,
                },
            ],
            "containerStatuses": [
                {
                    "name": container.name,
                    "image": container.image,
                    "imageID": f"local://{container.image}",
                    "ready": ready,
                    "started": "running" in state,
                    "restartCount": 0,
                    "state": state,
                }
            ],
        }
        if reason:
            status["reason"], status["message"] = reason, message
        with contextlib.suppress(ApiException):
            self.core.patch_namespaced_pod_status(
                pod.metadata.name, pod.metadata.namespace, {"status": status}
            )

    def _fail(self, pod: Any, container: Any, reason: str, message: str) -> None:
        self.pods[pod.metadata.uid] = PodProcess(
            pod.metadata.namespace,
            pod.metadata.name,
            pod.metadata.uid,
            None,
            self.workdir / "none.log",
            _now(),
            finished=True,
        )
        state = {"terminated": {"exitCode": 128, "reason": reason, "message": message}}
        self._status(pod, "Failed", container, state, reason=reason, message=message)

    def _waiting(self, pod: Any, container: Any, reason: str, message: str) -> None:
        self._status(pod, "Pending", container, {"waiting": {"reason": reason, "message": message}})

    # -- exits and deletion ------------------------------------------------------------------

    def _reap(self) -> None:
        for pod in list(self.pods.values()):
            if pod.finished or pod.process is None or pod.terminating_since is not None:
                continue
            code = pod.process.poll()
            if code is None:
                continue
            pod.finished = True
            try:
                live = self.core.read_namespaced_pod(pod.name, pod.namespace)
            except ApiException:
                continue
            if live.metadata.uid != pod.uid:
                continue
            terminated = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": pod.started,
                "finishedAt": _now(),
            }
            container = live.spec.containers[0]
            if code != 0 and container.termination_message_policy == "FallbackToLogsOnError":
                terminated["message"] = termination_message(pod.log)
            state = {"terminated": terminated}
            phase = "Succeeded" if code == 0 else "Failed"
            self._status(live, phase, live.spec.containers[0], state)

    def _terminate(self, pod: Any, running: PodProcess | None) -> None:
        meta = pod.metadata
        process = running.process if running else None
        if process is not None and process.poll() is None:
            if running is not None and running.terminating_since is None:
                running.terminating_since = time.monotonic()
                grace = meta.deletion_grace_period_seconds
                running.grace = float(running.grace if grace is None else grace)
                with contextlib.suppress(ProcessLookupError):
                    # Like a container runtime: SIGTERM to the main process only (its children,
                    # e.g. Spark's JVM, are its to stop); SIGKILL to all after the grace period.
                    os.kill(process.pid, signal.SIGTERM)
                return
            if (
                running is not None
                and time.monotonic() - (running.terminating_since or 0) < running.grace
            ):
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if running is not None:
            running.finished = True
        with contextlib.suppress(ApiException):
            self.core.delete_namespaced_pod(
                meta.name,
                meta.namespace,
                grace_period_seconds=0,
                body=client.V1DeleteOptions(
                    grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta.uid)
                ),
            )
