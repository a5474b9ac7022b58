"""The operator's I/O with the API server: pipelines, their driver pods, Secrets and Events.

A thin typed facade over the `kubernetes` client that speaks plain dicts, so the reconciler reads
like the lifecycle it drives. Status is only ever written through the status subresource.
"""

from __future__ import annotations

import base64
import datetime
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from spindle.api.crd import PLURAL
from spindle.api.types import GROUP, KIND, VERSION
from spindle.k8s.pods import LABEL_PIPELINE, MANAGED


def api_client() -> client.ApiClient:
    """In a pod, the service account; elsewhere, KUBECONFIG or ~/.kube/config."""
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        return client.ApiClient()
    except config.ConfigException:
        api: client.ApiClient = config.new_client_from_config()  # type: ignore[no-untyped-call]
        return api


def _json(response: Any) -> Any:
    return json.loads(response.data)


def _drained(response: Any) -> None:
    """Read a response the operator does not need (`_preload_content=False`: not parsed into
    client models), so that its connection goes back to the pool."""
    response.data  # noqa: B018


METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
"""The Accept header that asks a LIST for each object's metadata only."""

REFUSED = frozenset({400, 403, 405, 413, 415, 422})
"""HTTP statuses with which the API server refuses a request itself (bad request, forbidden,
too large, invalid): asking again with the same input gets the same answer. A conflict, a
throttle, an expired token or a server error may pass on a retry; these never do."""


def refused(error: ApiException) -> bool:
    """Whether the API server refused the request for good (see `REFUSED`)."""
    return error.status in REFUSED


def too_large(error: ApiException) -> bool:
    """Whether the API server refused a write as too large: its own limit on a request (413),
    or etcd's, which it passes on as a 500 ("etcdserver: request is too large") or a 422."""
    said = api_message(error).lower()
    large = "too large" in said or "larger than max" in said
    return error.status == 413 or (error.status in (422, 500) and large)


def api_message(error: ApiException) -> str:
    """The API server's own words (its Status message), else the HTTP reason."""
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)


class SecretMissing(Exception):
    def __init__(self, name: str, key: str | None) -> None:
        super().__init__(name, key)
        self.name, self.key = name, key


class SecretUnreadable(Exception):
    """The API server refused the operator's GET of a Secret (`refused`): retrying never helps."""

    def __init__(self, name: str, *, status: int, detail: str) -> None:
        super().__init__(name, status, detail)
        self.name, self.status, self.detail = name, status, detail


def _newer(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is newer than `than`: etcd's revisions are numbers; any
    other store's opaque version is taken as the newer (it came later)."""
    if version.isdigit() and than.isdigit():
        return int(version) > int(than)
    return True


@dataclass
class PodVersions:
    """How fresh a pipeline's pod list must be (`Cluster.driver_pods`): never older than the
    newest resourceVersion of its pods this process has seen (a list, a pod it created, a watch
    event), and, for a pipeline it has not seen yet, than its first consistent list of pods."""

    first: str | None = None
    """The resourceVersion of this process's first list of pods, a consistent read: every pod
    created before it is in every later list."""
    _seen: dict[tuple[str, str], str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def floor(self, namespace: str, pipeline: str) -> str | None:
        return self._seen.get((namespace, pipeline), self.first)

    def saw(self, namespace: str, pipeline: str, version: str, *, consistent: bool = False) -> None:
        with self._lock:
            if consistent and self.first is None:
                self.first = version
            current = self._seen.get((namespace, pipeline))
            if current is None or _newer(version, current):
                self._seen[(namespace, pipeline)] = version

    def forget(self, namespace: str, pipeline: str) -> None:
        with self._lock:
            self._seen.pop((namespace, pipeline), None)


@dataclass
class Cluster:
    api: client.ApiClient
    pod_versions: PodVersions = field(default_factory=PodVersions, init=False, repr=False)

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    # -- pipelines ---------------------------------------------------------------------------

    def pipeline(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _json(  # type: ignore[no-any-return]
                self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, _preload_content=False
                )
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def pipelines(self, namespaces: list[str] | None) -> list[dict[str, Any]]:
        """Every Pipeline's metadata, without its spec and status (a re-list decides from the
        metadata alone, `reconcile.inputs`): a `PartialObjectMetadataList`, a fraction of the
        bytes to read and parse."""
        metadata = {"Accept": METADATA_ONLY}
        if namespaces is None:
            body = _json(
                self.custom.list_cluster_custom_object(
                    GROUP, VERSION, PLURAL, _preload_content=False, _headers=metadata
                )
            )
            return list(body.get("items") or [])  # null when there are none
        items: list[dict[str, Any]] = []
        for namespace in namespaces:
            body = _json(
                self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, _preload_content=False, _headers=metadata
                )
            )
            items.extend(body.get("items") or [])
        return items

    def write_status(self, pipeline: dict[str, Any], status: dict[str, Any]) -> None:
        """Replace the whole status (a JSON patch `add`), guarded by the object's uid."""
        meta = pipeline["metadata"]
        patch = [
            {"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
            {"op": "add", "path": "/status", "value": status},
        ]
        _drained(
            self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                meta["namespace"],
                PLURAL,
                meta["name"],
                patch,
                _content_type="application/json-patch+json",
                _preload_content=False,
            )
        )

    # -- driver pods -------------------------------------------------------------------------

    def driver_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The pipeline's driver and preview pods, from the API server's watch cache, never
        older than what this process has seen of them (`PodVersions`): it sees the pods it
        created, every pod created before its first list, and each pod at least as its last
        watch event showed it, and it never goes back in time.

        Only the process's first list is a consistent read (no resourceVersion): the API server
        serves that from its cache only once the cache has proven itself as fresh as etcd, and
        asks etcd for that proof every 100 ms, so each reconcile waited 0-100 ms for it (a new
        pipeline's apply took 0.02-0.11 s to AwaitingApproval). A cache that lags further than
        the API server waits (504) is read consistently instead."""
        selector = (
            f"{LABEL_PIPELINE}={name},app.kubernetes.io/managed-by="
            + (MANAGED["app.kubernetes.io/managed-by"])
        )
        floor = self.pod_versions.floor(namespace, name)
        try:
            body = self._pods(namespace, selector, floor)
        except ApiException as error:
            if error.status != 504 or floor is None:
                raise
            floor, body = None, self._pods(namespace, selector, None)
        version = body["metadata"]["resourceVersion"]
        self.pod_versions.saw(namespace, name, version, consistent=floor is None)
        return list(body.get("items") or [])

    def _pods(self, namespace: str, selector: str, floor: str | None) -> Any:
        """A LIST of pods: not older than `floor`, or a consistent read (None)."""
        fresh: dict[str, Any] = {}
        if floor is not None:
            fresh = {"resource_version": floor, "resource_version_match": "NotOlderThan"}
        return _json(
            self.core.list_namespaced_pod(
                namespace, label_selector=selector, _preload_content=False, **fresh
            )
        )

    def create_pod(self, pod: dict[str, Any]) -> bool:
        """Create the pod; False when it already exists (it is adopted, never duplicated)."""
        meta = pod["metadata"]
        try:
            created = _json(
                self.core.create_namespaced_pod(
                    meta["namespace"],
                    pod,  # type: ignore[arg-type]
                    _preload_content=False,
                )
            )
            pipeline = (meta.get("labels") or {}).get(LABEL_PIPELINE)
            if pipeline:
                version = created["metadata"]["resourceVersion"]
                self.pod_versions.saw(meta["namespace"], pipeline, version)
            return True
        except ApiException as error:
            if error.status == 409:
                return False
            raise

    def delete_pod(self, pod: dict[str, Any], *, grace_seconds: int | None = None) -> None:
        meta = pod["metadata"]
        try:
            _drained(
                self.core.delete_namespaced_pod(
                    meta["name"],
                    meta["namespace"],
                    body=client.V1DeleteOptions(
                        grace_period_seconds=grace_seconds,
                        preconditions=client.V1Preconditions(uid=meta["uid"]),
                    ),
                    _preload_content=False,
                )
            )
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    # -- secrets and events ------------------------------------------------------------------

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """Every key of a Secret, decoded."""
        try:
            secret = _json(
                self.core.read_namespaced_secret(name, namespace, _preload_content=False)
            )
        except ApiException as error:
            if error.status == 404:
                raise SecretMissing(name, None) from None
            if refused(error):
                raise SecretUnreadable(
                    name, status=int(error.status), detail=api_message(error)
                ) from None
            raise
        return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}

    def event(self, pipeline: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        meta = pipeline["metadata"]
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {  # plain JSON, as the API server takes it: no client models to build
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:12]}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": KIND,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type,
            "reason": reason,
            "message": message[:1024],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": "spindle-operator"},
            "reportingComponent": "spindle.dev/operator",
            "reportingInstance": "spindle-operator",
        }
        _drained(
            self.core.create_namespaced_event(
                meta["namespace"],
                body,  # type: ignore[arg-type]
                _preload_content=False,
            )
        )
