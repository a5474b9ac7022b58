"""The reference's student-grades example, replayed exactly through the local CLI: on a local
directory and on the real S3 server. Every number from feldera-bootstrapping.md is asserted."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.cli.cluster_query import exchange
from spindle.cli.main import main
from spindle.errors import SpindleError
from spindle.local import runner
from spindle.local.home import LocalPipeline
from spindle.program.queries import MAX_QUERY_ROWS
from tests.unit.test_plan_golden import REFERENCE_DIFF

EXAMPLE = Path("examples/grades")
STUDENTS = "insert into students values (1, 'Alice'), (2, 'Bob')"
GRADES = """insert into grades values
(1, 'algebra', 97, '2025-09-15'), (1, 'physics', 89, '2025-11-15'),
(2, 'algebra', 85, '2025-10-22'), (2, 'physics', 93, '2025-12-05'),
(1, 'algebra', 95, '2026-01-15'), (1, 'physics', 87, '2026-03-15'),
(2, 'algebra', 98, '2026-04-22'), (2, 'physics', 91, '2026-05-05')"""


class Cli:
    def __init__(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.home, self.capsys = home, capsys
        self.err = ""

    def __call__(self, *args: str, expect: int = 0) -> str:
        self.capsys.readouterr()
        code = main([*args, "--home", str(self.home)])
        out = self.capsys.readouterr()
        assert code == expect, out.out + out.err
        self.err = out.err  # progress lines
        return out.out

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json"))


@pytest.fixture(params=["file", "s3"])
def manifests(
    request: pytest.FixtureRequest, tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """The v1 and v2 manifests, with storage on a local directory or on the S3 server."""
    paths = []
    for version in ("v1", "v2"):
        document = yaml.safe_load((EXAMPLE / f"pipeline-{version}.yaml").read_text())
        if request.param == "s3":
            s3 = request.getfixturevalue("s3")
            if version == "v1":
                bucket = s3.bucket("grades")
                for key, value in s3.env().items():
                    monkeypatch.setenv(key, value)
            document["spec"]["storage"] = {
                "uri": f"s3://{bucket}/pipelines",
                "endpoint": s3.endpoint,
                "region": s3.region,
            }
        path = tmp_path / f"pipeline-{version}.yaml"
        path.write_text(yaml.safe_dump(document))
        paths.append(path)
    return paths[0], paths[1]


def test_reference_example_end_to_end(
    manifests: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, v2 = manifests
    home = tmp_path / "my home é"  # spelled as it is in every URI: a space is not `%20`
    cli = Cli(home, capsys)
    applied = cli.json("local", "apply", "-f", str(v1))
    assert (applied["phase"], applied["conditions"][0]["reason"]) == ("Stopped", "NotRunning")
    assert "spindle local run grades" in applied["conditions"][0]["message"]
    cli("local", "execute", "grades", STUDENTS)
    cli("local", "execute", "grades", GRADES)
    cli("local", "run", "grades", "--until-idle")
    query = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"
    assert cli.json("query", "grades", query) == [
        {"student_name": "Alice", "class": "algebra", "class_avg": "97.00"},
        {"student_name": "Alice", "class": "physics", "class_avg": "89.00"},
        {"student_name": "Bob", "class": "algebra", "class_avg": "85.00"},
        {"student_name": "Bob", "class": "physics", "class_avg": "93.00"},
    ]
    assert not [path for path in tmp_path.rglob("*") if "%" in path.name]  # no `my%20home`

    status = cli.json("local", "apply", "-f", str(v2))
    assert status["phase"] == "AwaitingApproval"
    pending = status["pendingChange"]
    assert pending["diff"] == REFERENCE_DIFF
    assert cli.json("local", "status", "grades")["pendingChange"]["id"] == pending["id"]
    refused = cli("local", "approve", "grades", "0123456789ab", expect=1)
    assert refused == ""  # the error went to stderr, naming the pending id (checked below)
    assert LocalPipeline(home, "grades").approval is None

    store = LocalPipeline(home, "grades").store()
    before = store.latest()
    assert before is not None
    from tests.integration.test_review import check_preview  # reviewing this very change

    preview = check_preview(cli, store, pending)
    assert "Preview of change" in cli("local", "approve", "grades", pending["id"])
    cli("local", "run", "grades", "--until-idle")

    after = store.latest()
    assert after is not None and after.bootstrap is not None
    assert after.parent == before.id  # bootstrapped from the committed checkpoint, not scratch
    assert not any(r.path.startswith("scratch/") for r in after.state.values())
    assert after.bootstrap.change_id == pending["id"]
    assert after.bootstrap.input_records_read == 0
    assert after.bootstrap.views_evaluated == [
        "avg_grade",
        "avg_grade_enriched",
        "avg_grade_all_courses",
    ]
    for table in ("students", "grades"):  # tables are neither re-ingested nor rewritten
        assert after.state[table] == before.state[table]
    assert after.state["avg_grade_enriched"].path != before.state["avg_grade_enriched"].path

    assert cli.json("query", "grades", query) == [
        {"student_name": "Alice", "class": "algebra", "class_avg": "96.00"},
        {"student_name": "Alice", "class": "physics", "class_avg": "88.00"},
        {"student_name": "Bob", "class": "algebra", "class_avg": "91.50"},
        {"student_name": "Bob", "class": "physics", "class_avg": "92.00"},
    ]
    all_courses = [{"student_id": 1, "avg": "92.00"}, {"student_id": 2, "avg": "91.75"}]
    assert (
        cli.json("query", "grades", "SELECT * FROM avg_grade_all_courses ORDER BY student_id")
        == all_courses
        == preview["views"][2]["samples"]["added"]  # what the preview showed
    )
    final = cli.json("local", "status", "grades")  # the run returned: nothing runs or starts
    assert final["phase"] == "Stopped" and "pendingChange" not in final
    assert final["conditions"][0]["reason"] == "NotRunning"
    assert "spindle local run grades" in final["conditions"][0]["message"]
    assert final["lastCheckpoint"]["id"] == after.id
    assert final["lastBootstrap"]["changeId"] == pending["id"]
    refused = cli("query", "grades", "DELETE FROM grades", "--json", expect=1)
    assert json.loads(refused)["error_code"] == "QueryNotReadOnly"
    first = "SELECT * FROM avg_grade_all_courses ORDER BY student_id"
    shown = cli("query", "grades", first, "--limit", "1")  # an answer with more rows says so
    assert "92.00" in shown and "91.75" not in shown
    assert "the first row: the query has more" in " ".join(shown.split())
    assert cli.json("query", "grades", first, "--limit", "1") == all_courses[:1]
    too_many = cli("query", "grades", first, "--limit", "10001", "--json", expect=1)
    assert json.loads(too_many)["error_code"] == "InvalidQuery"
    nobody = "SELECT student_id, avg FROM avg_grade_all_courses WHERE avg > 100"
    assert re.search(r"student_id\s*┃\s*avg", cli("query", "grades", nobody))  # the header
    twice = cli("query", "grades", "SELECT avg, avg FROM avg_grade_all_courses", "--json", expect=1)
    assert json.loads(twice)["error_code"] == "InvalidQuery"  # one `avg` would hide the other
    assert "two columns named 'avg'" in json.loads(twice)["message"]
    served_by_a_driver(home, query, cli.json("query", "grades", query), after.id)


def served_by_a_driver(home: Path, query: str, rows: list[Any], checkpoint: str) -> None:
    """The driver pod's query server, started here on this machine's loopback, answers what
    `spindle query` does, and refuses by itself (these requests skip the client's check)."""
    from spindle.runtime.query_server import QueryServer

    runtime = runner.open_runtime(LocalPipeline(home, "grades"), report=lambda *_, **__: None)
    said: list[str] = []
    server = QueryServer(runtime, port=0, say=said.append).start()

    def ask(sql: str, limit: int = MAX_QUERY_ROWS) -> dict[str, Any]:
        connection = socket.create_connection(("127.0.0.1", server.port))
        return exchange(connection, sql, timeout=120, limit=limit)

    try:
        columns = ["student_name", "class", "class_avg"]
        assert ask(query) == {
            "checkpoint": checkpoint,
            "columns": columns,
            "rows": rows,
            "truncated": False,
        }
        assert ask(query, limit=1) == {
            "checkpoint": checkpoint,
            "columns": columns,
            "rows": rows[:1],
            "truncated": True,
        }
        with pytest.raises(SpindleError) as refusal:
            ask(query, limit=0)
        assert refusal.value.reason == "InvalidQuery"
        for sql, reason in [
            ("INSERT INTO grades VALUES (1, 'algebra', 97, '2025-09-15')", "QueryNotReadOnly"),
            ("SELECT * FROM grades; DROP TABLE grades", "QueryNotReadOnly"),
            ("SELECT reflect('java.lang.System', 'exit', 0)", "QueryNotReadOnly"),
            ("SELECT * FROM avg_grade", "InvalidQuery"),  # not materialized
            ("SELECT * FROM json.`/etc/passwd`", "InvalidQuery"),
        ]:
            with pytest.raises(SpindleError) as refusal:
                ask(sql)
            assert refusal.value.reason == reason, sql
        assert ask(query)["rows"] == rows  # still there, unchanged
        for head in ("Content-Length: -5", "Content-Length: x"):
            assert raw(server.port, head, b"") == "InvalidQuery"
        assert raw(server.port, "Content-Length: 3", b"[1]") == "InvalidQuery"  # was a 500
        with pytest.raises(SpindleError) as late:
            exchange(
                socket.create_connection(("127.0.0.1", server.port)), query, timeout=1e-6, limit=9
            )
        assert late.value.reason == "QueryTimedOut" and "--timeout" in late.value.message
        assert ask(query)["rows"] == rows  # the answer it could not send is not in the way
        # a query whose client left (its --timeout) is cancelled, not run to its end
        heavy = json.dumps({"sql": "SELECT count(*) AS n FROM " + ", ".join(["grades"] * 12)})
        with socket.create_connection(("127.0.0.1", server.port)) as leaving:
            head = f"POST /query HTTP/1.0\r\nContent-Length: {len(heavy)}\r\n\r\n"
            leaving.sendall(head.encode() + heavy.encode())
        assert ask(query)["rows"] == rows  # it held every later query for hours
        *_, group = [line.split()[4].rstrip("):") for line in said if "cancelled" in line]
        tracker = runtime.spark.sparkContext.statusTracker()
        ended = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
        assert any(job is not None and job.status == "FAILED" for job in ended), ended  # cancelled
    finally:
        idle = socket.create_connection(("127.0.0.1", server.port))  # a port-forward left open
        stopping = threading.Thread(target=server.stop)
        stopping.start()
        stopping.join(60)  # it waited for the idle connection's request, for ever
        idle.close()
    assert not stopping.is_alive()


def raw(port: int, header: str, body: bytes) -> str:
    """The error code of a request the client would not send."""
    with socket.create_connection(("127.0.0.1", port)) as connection:
        head = f"POST /query HTTP/1.0\r\n{header}\r\n\r\n".encode()
        connection.sendall(head + body)
        answer = b"".join(iter(lambda: connection.recv(65536), b""))
    return str(json.loads(answer.split(b"\r\n\r\n", 1)[1])["error_code"])


def test_wrong_approval_names_the_pending_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any
) -> None:
    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", str(EXAMPLE / "pipeline-v1.yaml"))
    cli("local", "run", "grades", "--until-idle")
    pending = cli.json("local", "apply", "-f", str(EXAMPLE / "pipeline-v2.yaml"))["pendingChange"]
    capsys.readouterr()
    assert (
        main(["local", "approve", "grades", "0123456789ab", "--home", str(tmp_path / "home")]) == 1
    )
    err = capsys.readouterr().err
    assert "ApprovalMismatch" in err and pending["id"] in err
    assert cli.json("local", "status", "grades")["phase"] == "AwaitingApproval"
    # running without approval refuses and changes nothing
    capsys.readouterr()
    assert main(["local", "run", "grades", "--home", str(tmp_path / "home")]) == 1
    assert "AwaitingApproval" in capsys.readouterr().err
