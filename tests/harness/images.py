"""How the test node agent turns a container image into a local command. Explicit, on purpose.

No container runtime runs here, so each image the tests use is mapped to what it would run:

| image repository                       | what runs                                            |
|----------------------------------------|------------------------------------------------------|
| ghcr.io/spindle-dev/spindle-spark      | the container command from this project's .venv/bin |
| ghcr.io/spindle-dev/spindle-operator   | the container command from this project's .venv/bin |
| docker.io/library/busybox              | the container command with the host's own utilities  |

Any other image makes the pod fail with reason `ImageNotMapped`, never run something else.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


class ImageNotMapped(Exception):
    pass


def repository(image: str) -> str:
    """`busybox:1.36` → `docker.io/library/busybox`; tags and digests are dropped."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    if "/" not in name:
        name = f"library/{name}"
    first = name.split("/", 1)[0]
    if "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    return name


def _from_venv(argv: Sequence[str]) -> list[str]:
    program = VENV_BIN / argv[0]
    if not program.exists():
        raise ImageNotMapped(f"{argv[0]} is not installed in {VENV_BIN}")
    return [str(program), *argv[1:]]


def _from_host(argv: Sequence[str]) -> list[str]:
    program = shutil.which(argv[0])
    if program is None:
        raise ImageNotMapped(f"{argv[0]} is not available on this host")
    return [program, *argv[1:]]


@dataclass(frozen=True)
class ImageRule:
    repository: str
    resolve: Callable[[Sequence[str]], list[str]]


RULES: tuple[ImageRule, ...] = (
    ImageRule("ghcr.io/spindle-dev/spindle-spark", _from_venv),
    ImageRule("ghcr.io/spindle-dev/spindle-operator", _from_venv),
    ImageRule("docker.io/library/busybox", _from_host),
)


def command_for(image: str, argv: Sequence[str]) -> list[str]:
    wanted = repository(image)
    for rule in RULES:
        if rule.repository == wanted:
            if not argv:
                raise ImageNotMapped(f"image {image} needs an explicit command here")
            return rule.resolve(argv)
    raise ImageNotMapped(
        f"image {image} is not mapped to a local command (see tests/harness/images.py)"
    )
