"""Many mutated manifests through `kubectl apply`, as a user sends them, and what became of each.

Throughput: manifests that are YAML documents go fifty to a `kubectl apply` (one stream of
documents); a stream whose answers do not add up to its documents (kubectl stopped at one it
could not decode) is retried in halves, down to single manifests. Manifests that are only text
(a YAML bomb, broken YAML) go one per `kubectl apply`, a few in parallel. What the API server
accepted is then awaited: each must reach a status for its generation with a CamelCase reason,
and is deleted once it has, so the operator's load stays that of one batch.

`kubectl apply` is client-side apply, as users run it: it copies the manifest into the
`last-applied-configuration` annotation, so a `spec.sql` over 256 KiB is the API server's 422
(`metadata.annotations: Too long`) before any operator sees it.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tests.fuzz.manifests import ManifestMutant
from tests.fuzz.outcomes import CAMEL_CASE
from tests.kube import Kube
from tests.waiting import wait_for

BATCH = 50
SETTLE_SECONDS = 300.0
CREATED = re.compile(r"^pipeline\.spindle\.dev/(m\d+) (?:created|configured|unchanged)$", re.M)
SERVER = re.compile(r"^Error from server(?: \((\w+)\))?: ([^:\n]{0,40})", re.M)
INVALID = re.compile(r'^The \w+ "m\d+" is invalid', re.M)
"""How kubectl words a lone 422 (HTTP Invalid), without `Error from server`."""
CLIENT = re.compile(r"^error: ", re.M)
STORM_NAME = re.compile(r"^m\d+$")


@dataclass
class Storm:
    kube: Kube
    namespace: str
    refused: Counter[str] = field(default_factory=Counter)
    """By who refused and why: `api:Invalid` (HTTP 422), `api:BadRequest` (400), ...,
    `kubectl:<problem>` for what kubectl itself would not send."""
    reasons: Counter[str] = field(default_factory=Counter)
    """Condition reasons of the manifests the API server accepted."""
    unexplained: list[str] = field(default_factory=list)
    """Outcomes that are neither: a kubectl failure without a refusal, a status with a reason
    that is not CamelCase, an internal error."""
    accepted: set[str] = field(default_factory=set)
    settle_seconds: list[float] = field(default_factory=list)
    """How long each accepted batch took to get its reasons (the operator's latency)."""
    apply_seconds: list[float] = field(default_factory=list)
    """How long each `kubectl apply` took."""

    @property
    def outcomes(self) -> int:
        return sum(self.refused.values()) + sum(self.reasons.values())

    def send(self, mutants: Sequence[ManifestMutant]) -> None:
        documents = [m for m in mutants if m.document is not None]
        texts = [m for m in mutants if m.document is None]
        for start in range(0, len(documents), BATCH):
            self._settle(self._apply_batch(documents[start : start + BATCH]))
        with ThreadPoolExecutor(4) as pool:
            accepted = [name for found in pool.map(self._apply_one, texts) for name in found]
        self._settle(accepted)

    def _kubectl_apply(self, text: str) -> tuple[list[str], str]:
        started = time.monotonic()
        result = self.kube.kubectl(
            "apply", "-n", self.namespace, "-f", "-", input=text, check=False
        )
        self.apply_seconds.append(time.monotonic() - started)
        return CREATED.findall(result), result

    def _count_refusals(self, output: str) -> int:
        server = SERVER.findall(output)
        for reason, text in server:
            self.refused[f"api:{reason or text}"] += 1
        invalid = len(INVALID.findall(output))
        self.refused["api:Invalid"] += invalid
        return len(server) + invalid

    def _apply_batch(self, batch: list[ManifestMutant]) -> list[str]:
        """Apply `batch` as one stream; when its answers do not add up (kubectl stopped at a
        document it could not decode), the rest again in halves, down to single manifests."""
        if len(batch) == 1:
            return self._apply_one(batch[0])
        created, output = self._kubectl_apply("\n---\n".join(m.text for m in batch))
        if len(created) + len(SERVER.findall(output)) + len(INVALID.findall(output)) == len(batch):
            self._count_refusals(output)
            return created
        rest = [m for m in batch if m.name not in created]
        halves = [part for part in (rest[: len(rest) // 2], rest[len(rest) // 2 :]) if part]
        return created + [name for part in halves for name in self._apply_batch(part)]

    def _apply_one(self, mutant: ManifestMutant) -> list[str]:
        created, output = self._kubectl_apply(mutant.text)
        if created:
            return created
        if self._count_refusals(output):
            return []
        if CLIENT.search(output):
            self.refused[f"kubectl:{_client_problem(output)}"] += 1
        else:
            self.unexplained.append(f"{mutant.name} {mutant.mutations}: {output[-400:]}")
        return []

    def _settle(self, names: list[str]) -> None:
        """Wait until each accepted pipeline has a status for its generation, tally its
        reason, and delete it."""
        if not names:
            return
        self.accepted.update(names)
        pending = set(names)
        started = time.monotonic()

        def settled() -> bool:
            for item in self.pipelines():
                name, status = item["metadata"]["name"], item.get("status") or {}
                generation = item["metadata"]["generation"]
                conditions = status.get("conditions") or []
                if name not in pending or status.get("observedGeneration") != generation:
                    continue
                if not conditions:
                    continue
                pending.discard(name)
                self._tally(name, conditions[0])
            return not pending

        try:
            wait_for(
                f"{len(pending)} pipelines to report a reason", settled, timeout=SETTLE_SECONDS
            )
        except AssertionError:
            self.unexplained.extend(f"{name}: no condition" for name in sorted(pending))
        self.settle_seconds.append(time.monotonic() - started)
        self.kube.kubectl(
            "delete", "pipelines", *names, "-n", self.namespace, "--wait=false", check=False
        )

    def pipelines(self) -> list[dict[str, Any]]:
        body = self.kube.kubectl("get", "pipelines", "-n", self.namespace, "-o", "json")
        return [i for i in json.loads(body)["items"] if STORM_NAME.match(i["metadata"]["name"])]

    def gone(self, *, timeout: float = 120.0) -> None:
        """Wait until the storm's pipelines are all deleted (finalizers included), so what runs
        next does not share the operator with them."""
        wait_for(
            "the storm's pipelines to be deleted", lambda: not self.pipelines(), timeout=timeout
        )

    def _tally(self, name: str, condition: dict[str, Any]) -> None:
        reason = str(condition.get("reason"))
        self.reasons[reason] += 1
        if reason == "InternalError" or not CAMEL_CASE.match(reason):
            self.unexplained.append(f"{name}: {condition}")

    def report(self) -> str:
        refused = sum(self.refused.values())
        settle = sorted(self.settle_seconds) or [0.0]
        lines = [
            f"refused: {refused}",
            *(f"  {kind:<40} {n:>5}" for kind, n in self.refused.most_common()),
            f"accepted, then a condition: {sum(self.reasons.values())} of {len(self.accepted)}",
            *(f"  {reason:<40} {n:>5}" for reason, n in self.reasons.most_common()),
            f"settling a batch: median {settle[len(settle) // 2]:.1f}s, max {settle[-1]:.1f}s",
            f"kubectl apply: {len(self.apply_seconds)} calls, {sum(self.apply_seconds):.0f}s",
            f"unexplained: {len(self.unexplained)}",
            *self.unexplained[:20],
        ]
        return "\n".join(lines)


def _client_problem(output: str) -> str:
    """kubectl's own refusal, short: 'excessive aliasing', 'yaml: line N: ...'."""
    if "excessive aliasing" in output:
        return "excessive aliasing"
    line = CLIENT.search(output)
    text = output[line.end() :].splitlines()[0] if line else output
    text = re.sub(r"line \d+(: column \d+)?", "line N", text)
    return re.sub(r'"m\d+"', '"mN"', text)[:60]
