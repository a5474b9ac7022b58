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


def test_a_delete_removes_the_directories_it_empties_and_the_empty_ones_delta_leaves_in_them(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    store.write("scratch/preview-1/views/v@1/_delta_log/00000000000000000000.json", b"{}")
    store.write("scratch/preview-1/views/v@1/part-0.parquet", b"x")
    (tmp_path / "scratch/preview-1/views/v@1/_delta_log/_staged_commits").mkdir()
    store.write("scratch/kept/a.json", b"{}")
    (tmp_path / "scratch/kept/empty").mkdir()

    store.delete([item.key for item in store.scan("scratch/preview-1/")])
    assert not (tmp_path / "scratch/preview-1").exists()
    assert [item.key for item in store.scan("scratch/")] == ["scratch/kept/a.json"]
    assert (tmp_path / "scratch/kept/empty").is_dir()  # not under what was deleted
