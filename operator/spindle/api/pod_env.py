"""How the operator hands a driver pod its pipeline: as JSON in environment variables.

Linux refuses to start a process with one environment string of 128 KiB or more
(`MAX_ARG_STRLEN`), and a pipeline's SQL can be larger (a Pipeline object holds up to about
1.5 MiB), so the JSON is cut into parts under that limit: `SPINDLE_PIPELINE` holds the first,
`SPINDLE_PIPELINE_PARTS` how many there are, and `SPINDLE_PIPELINE_1`, ... the rest. The
operator writes them (`pipeline_env`); the driver reads them back (`pipeline_json`).
"""

from __future__ import annotations

from collections.abc import Mapping

PIPELINE_ENV = "SPINDLE_PIPELINE"
PARTS_ENV = "SPINDLE_PIPELINE_PARTS"
PART_CHARACTERS = 120_000
"""The most characters of JSON one variable holds: the JSON is ASCII (non-ASCII characters are
escaped), so this many bytes, with its name, stay under the kernel's 131,072."""


def pipeline_env(text: str) -> list[tuple[str, str]]:
    """The variables (name, value) that carry `text`, an ASCII JSON document."""
    parts = [text[i : i + PART_CHARACTERS] for i in range(0, len(text), PART_CHARACTERS)] or [""]
    if len(parts) == 1:
        return [(PIPELINE_ENV, parts[0])]
    rest = [(f"{PIPELINE_ENV}_{index}", part) for index, part in enumerate(parts[1:], start=1)]
    return [(PIPELINE_ENV, parts[0]), (PARTS_ENV, str(len(parts))), *rest]


def pipeline_json(env: Mapping[str, str]) -> str | None:
    """The JSON `pipeline_env` wrote into `env`; None when there is none."""
    first = env.get(PIPELINE_ENV)
    if not first:
        return None
    count = int(env.get(PARTS_ENV) or "1")
    return first + "".join(env[f"{PIPELINE_ENV}_{index}"] for index in range(1, count))
