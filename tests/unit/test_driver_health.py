"""The driver pod's readiness server: what the kubelet's probe hears while the driver steps,
waits to retry a step, and recovers."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest

from spindle.runtime.health import Health, serve_health


@pytest.fixture
def health() -> Iterator[Health]:
    server = Health(port=0, host="127.0.0.1").start()
    yield server
    server.stop()


def probe(server: Health, path: str = "/readyz") -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.read().decode()


def test_ready_while_stepping_not_ready_while_waiting_to_retry(health: Health) -> None:
    assert probe(health) == (200, "stepping\n")
    line = "Step 3 failed (StorageRefused): ... Retry 1 of 5 in 2 s, from checkpoint c."
    health.retrying(line)
    assert probe(health) == (503, line + "\n")
    health.retrying(None)  # recovered
    assert probe(health) == (200, "stepping\n")
    assert probe(health, "/query")[0] == 404


def test_a_port_taken_costs_the_readiness_only(health: Health) -> None:
    said: list[str] = []
    assert serve_health(port=None, say=said.append) is None
    assert said == []
    assert serve_health(port=health.port, say=said.append) is None  # taken (any address)
    assert said and f"port {health.port} cannot be bound" in said[0]
