"""Many mutated manifests through `kubectl apply`, as a user sends them, and what became of each.

Throughput: manifests that are YAML documents go fifty to a `kubectl apply` (one stream of
documents); a stream kubectl cannot split (a document it cannot decode stops the whole stream)
is retried one manifest at a time. Manifests that are only text (a YAML bomb, broken YAML) go
one per `kubectl apply`, a few in parallel. What the API server accepted is then awaited: each
must reach a status for its generation with a CamelCase reason, and is deleted once it has, so
the operator's load stays that of one batch.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tests.fuzz.manifests import ManifestMutant
from tests.fuzz.outcomes import CAMEL_CASE
from tests.kube import Kube
from tests.waiting import wait_for

BATCH = 50
CREATED = re.compile(r"^pipeline\.spindle\.dev/(m\d+) (?:created|configured|unchanged)$", re.M)
SERVER = re.compile(r"^Error from server(?: \((\w+)\))?: ([^:\n]{0,40})", re.M)
CLIENT = re.compile(r"^error: ", re.M)


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

    def send(self, mutants: Iterable[ManifestMutant]) -> None:
        documents = [m for m in mutants if m.document is not None]
        texts = [m for m in mutants if m.document is None]
        for start in range(0, len(documents), BATCH):
            accepted = self._apply_batch(documents[start : start + BATCH])
            self._settle(accepted)
        with ThreadPoolExecutor(4) as pool:
            accepted = [name for found in pool.map(self._apply_one, texts) for name in found]
        self._settle(accepted)

    def _kubectl_apply(self, text: str) -> tuple[list[str], str]:
        result = self.kube.kubectl(
            "apply", "-n", self.namespace, "-f", "-", input=text, check=False
        )
        return CREATED.findall(result), result

    def _count_refusals(self, output: str) -> int:
        server = SERVER.findall(output)
        for reason, text in server:
            self.refused[f"api:{reason or text}"] += 1
        return len(server)

    def _apply_batch(self, batch: list[ManifestMutant]) -> list[str]:
        created, output = self._kubectl_apply("\n---\n".join(m.text for m in batch))
        if len(created) + len(SERVER.findall(output)) == len(batch):
            self._count_refusals(output)
            return created
        # kubectl stopped at a document it could not decode: one at a time, the rest again
        rest = [m for m in batch if m.name not in created]
        return created + [name for m in rest for name in self._apply_one(m)]

    def _apply_one(self, mutant: ManifestMutant) -> list[str]:
        created, output = self._kubectl_apply(mutant.text)
        if created:
            return created
        if self._count_refusals(output):
            return []
        client = CLIENT.search(output)
        if client:
            self.refused[f"kubectl:{_client_problem(output)}"] += 1
        else:
            self.unexplained.append(f"{mutant.name} {mutant.mutations}: {output[-400:]}")
        return []

    def _settle(self, names: list[str]) -> None:
        """Wait until each accepted pipeline has a status for its generation, tally its
        reason, and delete it."""
        if not names:
            return
        pending = set(names)

        def settled() -> bool:
            body = self.kube.kubectl("get", "pipelines", "-n", self.namespace, "-o", "json")
            for item in json.loads(body)["items"]:
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

        wait_for(f"{len(pending)} pipelines to report a reason", settled, timeout=300)
        self.kube.kubectl(
            "delete", "pipelines", *names, "-n", self.namespace, "--wait=false", check=False
        )

    def _tally(self, name: str, condition: dict[str, Any]) -> None:
        reason = str(condition.get("reason"))
        self.reasons[reason] += 1
        if reason == "InternalError" or not CAMEL_CASE.match(reason):
            self.unexplained.append(f"{name}: {condition}")

    def report(self) -> str:
        refused = sum(self.refused.values())
        lines = [
            f"refused: {refused}",
            *(f"  {kind:<40} {n:>5}" for kind, n in self.refused.most_common()),
            f"accepted, then a condition: {sum(self.reasons.values())}",
            *(f"  {reason:<40} {n:>5}" for reason, n in self.reasons.most_common()),
            f"unexplained: {len(self.unexplained)}",
            *self.unexplained[:20],
        ]
        return "\n".join(lines)


def _client_problem(output: str) -> str:
    """kubectl's own refusal, short: 'excessive aliasing', 'yaml: line 3: ...'."""
    if "excessive aliasing" in output:
        return "excessive aliasing"
    line = CLIENT.search(output)
    text = output[line.end() :].splitlines()[0] if line else output
    return re.sub(r"line \d+(: column \d+)?", "line N", text)[:60]
