"""The student-grades example from Feldera's bootstrapping guide, run locally with Spindle.

Every step is the `spindle` command a user would type, against a fresh home directory (no
cluster; state and checkpoints in a local directory; Spark in local mode):

1. apply v1, insert the 8 grade rows and 2 students, run until idle, query avg_grade_enriched;
2. apply v2 (date range to 2026-06-10, plus avg_grade_all_courses): AwaitingApproval + diff;
3. approve the change id and run: the bootstrap evaluates views from stored state;
4. query the new results, and show that no input record was read during the bootstrap.
The first run starts the home's warm Spark server, which the later commands reuse; the demo
stops it at the end.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
STUDENTS = "insert into students values (1, 'Alice'), (2, 'Bob')"
GRADES = """insert into grades values
(1, 'algebra', 97, '2025-09-15'),
(1, 'physics', 89, '2025-11-15'),
(2, 'algebra', 85, '2025-10-22'),
(2, 'physics', 93, '2025-12-05'),
(1, 'algebra', 95, '2026-01-15'),
(1, 'physics', 87, '2026-03-15'),
(2, 'algebra', 98, '2026-04-22'),
(2, 'physics', 91, '2026-05-05')"""


def spindle(*args: str, home: Path, capture: bool = False) -> str:
    shown = " ".join(shlex.quote(a) if "\n" not in a else "'...'" for a in args)
    print(f"\n$ spindle {shown}", flush=True)
    command = [sys.executable, "-m", "spindle.cli.main", *args]
    if args[0] in ("local", "query"):
        command += ["--home", str(home)]
    # stderr (progress: jar downloads, Spark's start, the bootstrap's views) as it comes
    process = subprocess.Popen(command, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout: list[str] = []
    reader = threading.Thread(target=lambda: stdout.extend(process.stdout or ()), daemon=True)
    reader.start()
    noise = ("WARN", "log4j", "setLogLevel", "SLF4J")
    for line in process.stderr or ():
        if not any(n in line for n in noise):
            print(line, end="", flush=True)
    returncode = process.wait()
    reader.join()
    out = "".join(stdout)
    if not capture:
        print(out, end="")
    if returncode != 0:
        sys.exit(f"demo failed: spindle {args[0]} exited with {returncode}")
    return out


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="spindle-demo-"))
    try:
        demo(home)
    finally:  # the first run started the home's warm Spark server; the demo leaves none behind
        spindle("local", "server", "stop", home=home)
        shutil.rmtree(home, ignore_errors=True)


def demo(home: Path) -> None:
    print("== Spindle demo: the student-grades pipeline (Feldera's bootstrapping example) ==")
    print(f"(home: {home}; no cluster, local storage, Spark in local mode)")
    spindle("local", "apply", "-f", str(HERE / "pipeline-v1.yaml"), home=home)
    spindle("local", "execute", "grades", STUDENTS, home=home)
    spindle("local", "execute", "grades", GRADES, home=home)
    spindle("local", "run", "grades", "--until-idle", home=home)
    query = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"
    spindle("query", "grades", query, home=home)

    print("\n== v2: extend the date range to 2026-06-10 and add avg_grade_all_courses ==")
    spindle("local", "apply", "-f", str(HERE / "pipeline-v2.yaml"), home=home)
    status = json.loads(spindle("local", "status", "grades", "--json", home=home, capture=True))
    change_id = status["pendingChange"]["id"]
    print(f"phase: {status['phase']}, pending change: {change_id}")
    print("diff:", json.dumps(status["pendingChange"]["diff"]["program_diff"]))
    spindle("local", "approve", "grades", change_id, home=home)
    spindle("local", "run", "grades", "--until-idle", home=home)
    spindle("query", "grades", query, home=home)
    spindle("query", "grades", "SELECT * FROM avg_grade_all_courses ORDER BY student_id", home=home)
    checkpoint = json.loads(
        spindle(
            "checkpoints",
            "show",
            status["lastCheckpoint"]["uri"].rsplit("/checkpoints/", 1)[0],
            "--json",
            home=home,
            capture=True,
        )
    )
    read = checkpoint["bootstrap"]["input_records_read"]
    print(f"\nInput records read from connectors during the bootstrap: {read}")


if __name__ == "__main__":
    main()
