"""How the operator hands a driver pod its pipeline: as JSON in environment variables.

Linux refuses to start a process with one environment string of 128 KiB or more
(`MAX_ARG_STRLEN`), and a pipeline's SQL can be larger (a Pipeline object holds up to about
1.5 MiB), so the JSON is cut into parts under that limit: `SPINDLE_PIPELINE` holds the first,
`SPINDLE_PIPELINE_PARTS` how many there are, and `SPINDLE_PIPELINE_1`, ... the rest. The
operator writes them (`pipeline_env`); the driver reads them back (`pipeline_json`).

Kubernetes expands `$(NAME)` in an environment value (a variable defined before it) and reads
`$$` as `$`: every `$` of the JSON (inside its strings: a SQL literal '$$', say) is written as
the JSON escape `\u0024`, which the driver's JSON parser reads back as `$`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PIPELINE_ENV = "SPINDLE_PIPELINE"
PARTS_ENV = "SPINDLE_PIPELINE_PARTS"
PART_BYTES = 120_000
"""The most bytes of UTF-8 one variable holds: with its name, under the kernel's 131,072."""


def pipeline_env(pipeline: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The variables (name, value) that carry `pipeline` as JSON."""
    text = json.dumps(pipeline, sort_keys=True, ensure_ascii=False).replace("$", "\\u0024")
    data = text.encode()
    parts: list[str] = []
    start = 0
    while start < len(data) or not parts:
        end = min(start + PART_BYTES, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # not inside a character
            end -= 1
        parts.append(data[start:end].decode())
        start = end
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
