"""The file backend's writes against its own deletes: a delete removes the directories it
empties, so a write into such a directory from another process or thread must not lose the
race (two drivers proving the same store at once both write, then delete, a probe under
`.spindle/selftest/`)."""

from __future__ import annotations

import threading
from pathlib import Path

from spindle.checkpoint.file_store import FileStore


def test_a_write_survives_a_concurrent_delete_emptying_its_directory(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def churn(name: str) -> None:
        start.wait()
        try:
            for round_ in range(400):
                key = f"probe/{name}-{round_}"
                store.write(key, b"1", if_none_match=True)
                store.delete([key])
        except BaseException as error:  # the test reports any failure
            failures.append(error)

    threads = [threading.Thread(target=churn, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert not (tmp_path / "probe").exists()  # the last delete still cleans up
