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


LINE = "Step 3 failed (StorageRefused): s3a://b/p: 403. Retry 1 of 5 in 2 s, from checkpoint c."


def test_ready_while_stepping_not_ready_while_waiting_to_retry(health: Health) -> None:
    assert probe(health) == (200, "stepping\n")
    health.retrying(LINE)
    assert probe(health) == (503, "retrying\n")  # the line stays in the log: no error text
    health.retrying(None)  # recovered
    assert probe(health) == (200, "stepping\n")
    assert probe(health, "/query")[0] == 404


def test_the_first_answer_is_ready_even_when_the_first_step_already_failed(
    health: Health,
) -> None:
    """A driver whose first step fails before the kubelet first asks is Ready once, so the
    operator sees it become not Ready after its container started: a retrying driver."""
    health.retrying(LINE)
    assert probe(health)[0] == 200
    assert probe(health)[0] == 503


def test_every_address_of_the_pod_is_served_and_a_port_taken_costs_the_readiness_only() -> None:
    said: list[str] = []
    assert serve_health(port=None, say=said.append) is None
    served = serve_health(port=0, say=said.append)
    assert served is not None and said == []
    try:
        assert probe(served)[0] == 200  # over IPv4, on a dual-stack or IPv4-only server
        assert serve_health(port=served.port, say=said.append) is None  # taken
        assert said and f"port {served.port} cannot be bound" in said[0]
    finally:
        served.stop()
