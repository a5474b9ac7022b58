"""The grades example from Feldera's bootstrapping guide, on Spindle.

Step 1 of the demo (what is built so far): plan the change from v1 to v2 and show the diff,
exactly as `spindle diff examples/grades/v1.sql examples/grades/v2.sql` prints it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spindle.cli.main import main

HERE = Path(__file__).parent

if __name__ == "__main__":
    print("== Spindle demo: the student-grades pipeline, v1 -> v2 ==")
    print("Planning the change (no cluster, no storage needed):\n")
    sys.exit(main(["diff", str(HERE / "v1.sql"), str(HERE / "v2.sql")]))
