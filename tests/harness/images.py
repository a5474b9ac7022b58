"""Container images built here, since no registry is reachable: a Debian base by debootstrap,
the pause and CoreDNS images from binaries built by `binaries`, and the project's own
Dockerfiles (`Dockerfile`, `spark-images/Dockerfile`) built with podman `FROM` that base.

Every image is keyed by a hash of its inputs (packages, Dockerfile, the files it copies, build
arguments, binaries), saved as an archive under `$SPINDLE_CACHE/images/`, and rebuilt only when
that hash changes. `load()` imports the archives into a node's containerd. Tags are versions,
never `latest`, so the kubelet never tries to pull.

The machine's package-index settings reach the builds only as build-time inputs: the build
runs on the host network (the registries are reached as from the host), and the CA bundle of a
TLS-intercepting proxy is lent as the build secret `ca`; neither is written into an image.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.harness import binaries, cache

ROOT = Path(__file__).resolve().parents[2]
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
OPERATOR_IMAGE = "ghcr.io/spindle-dev/spindle-operator:0.1.0"
SPARK_IMAGE = "ghcr.io/spindle-dev/spindle-spark:0.1.0"
PAUSE_IMAGE = f"localhost/spindle/pause:{binaries.PAUSE_VERSION}"
COREDNS_IMAGE = f"localhost/spindle/coredns:{binaries.COREDNS_VERSION}"
CONTEXT_FILES = ("pyproject.toml", "constraints.txt", "README.md", ".dockerignore")
CONTEXT_DIRS = ("operator", "spark-images")
STALE_AFTER = 3600.0
"""Seconds after which an archive of an image's older inputs is removed."""


def _digest(parts: Iterable[bytes | str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _files(paths: Iterable[Path]) -> Iterable[bytes | str]:
    for path in sorted(paths):
        generated = any(part == "__pycache__" or part.endswith(".egg-info") for part in path.parts)
        if generated or not path.is_file():
            continue
        yield str(path.relative_to(ROOT))
        yield path.read_bytes()


def _store() -> Path:
    path = cache.root() / "images"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def _podman_env() -> dict[str, str]:
    """podman with the settings this sandbox needs, and storage in the cache."""
    home = cache.root() / "podman"
    home.mkdir(parents=True, exist_ok=True)
    conf, storage = home / "containers.conf", home / "storage.conf"
    conf.write_text(
        '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=20000:20000"]\n'
        "[engine]\n"
        'cgroup_manager = "cgroupfs"\nevents_logger = "file"\nruntime = "runc"\n'
    )
    storage.write_text(
        '[storage]\ndriver = "overlay"\n'
        f'graphroot = "{home / "storage"}"\nrunroot = "/run/spindle-podman"\n'
    )
    return {**os.environ, "CONTAINERS_CONF": str(conf), "CONTAINERS_STORAGE_CONF": str(storage)}


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["podman", *args], env=_podman_env(), capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])} failed:\n{result.stderr[-4000:]}")
    return result


def _mirror() -> str:
    """The Debian mirror this machine's apt uses (its package-index setting)."""
    for source in [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]:
        if not source.is_file() or source.name.endswith("disabled-by-farm"):
            continue
        for line in source.read_text().splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"] and "security" not in line:
                return next(w for w in words[1:] if "://" in w)
    return "http://deb.debian.org/debian"


@dataclass(frozen=True)
class Built:
    reference: str
    archive: Path


def _saved(reference: str, key: str, build: Callable[[], None]) -> Built:
    """Run `build()` unless the archive for `key` exists, then save `reference` as that archive."""
    name = reference.rsplit("/", 1)[-1].replace(":", "-")
    archive = _store() / f"{name}-{key}.tar"
    if archive.exists():
        cache.record(f"image {reference}", "reused", 0.0)
        return Built(reference, archive)
    with cache.locked(f"image-{name}"):
        if archive.exists():
            return Built(reference, archive)
        cache.say(f"building image {reference} (inputs {key}, first run only)")
        with cache.timed(f"image {reference}", "built"):
            build()
            partial = archive.with_suffix(f".part{os.getpid()}")
            podman("save", "--format", "docker-archive", "-o", str(partial), reference)
            partial.replace(archive)
            # Older builds go, but not one another run may be about to import.
            for stale in _store().glob(f"{name}-*.tar"):
                if stale != archive and time.time() - stale.stat().st_mtime > STALE_AFTER:
                    stale.unlink(missing_ok=True)
    return Built(reference, archive)


def base() -> Built:
    """Debian bookworm (minbase) with Python 3.11 and venv, from debootstrap."""
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "debootstrap"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    key = _digest([SUITE, *BASE_PACKAGES, version])
    reference = f"localhost/spindle/base:{SUITE}-{key}"

    def build() -> None:
        with tempfile.TemporaryDirectory(dir=cache.root()) as scratch:
            rootfs = Path(scratch) / "rootfs"
            subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(BASE_PACKAGES)}",
                    SUITE,
                    str(rootfs),
                    _mirror(),
                ],
                capture_output=True,
                check=True,
            )
            shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
            tarball = Path(scratch) / "rootfs.tar"
            subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
            podman("import", "--change", 'CMD ["/bin/bash"]', str(tarball), reference)

    return _saved(reference, key, build)


def _from_scratch(reference: str, binary: Path, entrypoint: list[str]) -> Built:
    """An image holding one static binary (pause, CoreDNS)."""
    key = _digest([reference, binary.read_bytes(), *entrypoint])

    def build() -> None:
        with tempfile.TemporaryDirectory(dir=cache.root()) as context:
            shutil.copy2(binary, Path(context) / "binary")
            (Path(context) / "Containerfile").write_text(
                "FROM scratch\nCOPY binary /binary\nUSER 65534:65534\n"
                f"ENTRYPOINT {entrypoint!r}\n".replace("'", '"')
            )
            podman("build", "--pull=never", "-t", reference, context)

    return _saved(reference, key, build)


def pause() -> Built:
    return _from_scratch(PAUSE_IMAGE, binaries.ensure("pause"), ["/binary"])


def coredns() -> Built:
    return _from_scratch(COREDNS_IMAGE, binaries.ensure("coredns"), ["/binary"])


def _project(reference: str, dockerfile: Path, base_image: Built) -> Built:
    inputs = [ROOT / name for name in CONTEXT_FILES]
    for directory in CONTEXT_DIRS:
        inputs.extend((ROOT / directory).rglob("*"))
    key = _digest([reference, base_image.reference, dockerfile.read_bytes(), *_files(inputs)])

    def build() -> None:
        args = [
            "build",
            "--pull=never",
            "--network=host",
            "--build-arg",
            f"BASE={base_image.reference}",
            "-f",
            str(dockerfile),
            "-t",
            reference,
        ]
        if HOST_CA_BUNDLE.exists():
            args += ["--secret", f"id=ca,src={HOST_CA_BUNDLE}"]
        podman(*args, str(ROOT))

    return _saved(reference, key, build)


def project_images() -> list[Built]:
    """The operator and Spark images, from this repository's Dockerfiles on the Debian base."""
    debian = base()
    if podman("image", "exists", debian.reference, check=False).returncode != 0:
        podman("load", "-i", str(debian.archive))
    return [
        _project(OPERATOR_IMAGE, ROOT / "Dockerfile", debian),
        _project(SPARK_IMAGE, ROOT / "spark-images" / "Dockerfile", debian),
    ]


def ensure_all() -> list[Built]:
    """Every image the test cluster runs, built or reused."""
    return [pause(), coredns(), *project_images()]
