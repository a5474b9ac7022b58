"""The query server's watch on a query's connection (`runtime.query_server.Abandonment`): a
client that left has its query's jobs cancelled, and one that waits is not. (The watch ends
with the answer, woken at once: it held every answer up to half a second; not timed here.)"""

from __future__ import annotations

import socket
import threading
from typing import Any

from spindle.runtime.query_server import Abandonment


class Context:
    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.asked = threading.Event()

    def cancelJobGroup(self, group: str) -> None:
        self.cancelled.append(group)
        self.asked.set()


class Spark:
    def __init__(self) -> None:
        self.sparkContext = Context()


def test_a_waiting_client_is_not_cancelled_and_the_watch_ends_with_the_answer() -> None:
    server, client = socket.socketpair()
    spark: Any = Spark()
    watch = Abandonment(server, spark)
    with watch:
        pass
    assert not watch._watcher.is_alive() and not watch.gone  # joined: no wait left over
    assert spark.sparkContext.cancelled == []
    server.close(), client.close()


def test_a_client_that_left_has_its_query_cancelled() -> None:
    server, client = socket.socketpair()
    spark: Any = Spark()
    client.close()  # its --timeout passed
    with Abandonment(server, spark) as watch:
        assert spark.sparkContext.asked.wait(10)
    assert watch.gone and spark.sparkContext.cancelled[0] == watch.group
    server.close()
