"""Real servers and tools, built from their Go modules into the versioned cache.

A declarative table: each tool names its version and how it is built. Kubernetes components
come from a small wrapper module (gomod/kubernetes) whose go.mod pins every k8s.io staging module
to the matching v0.x.y with `replace` directives; etcd from a wrapper around its server module;
versitygw, helm and CoreDNS with a plain `go install module/cmd/...@version`; the pod sandbox's
pause process from a tiny module of our own. Kubernetes binaries carry version ldflags, so the
server and the node report v1.34.4, not v0.0.0. A binary's cache name includes a hash of its
build recipe, so changing the recipe rebuilds it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.harness import cache

GOMOD = Path(__file__).parent / "gomod"
KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.5"
VERSITYGW_VERSION = "v1.8.0"
HELM_VERSION = "v3.19.5"
COREDNS_VERSION = "v1.12.4"
PAUSE_VERSION = "3.10-spindle1"
_K8S_LDFLAGS = " ".join(
    f"-X k8s.io/component-base/version.{key}={value}"
    for key, value in (
        ("gitVersion", KUBERNETES_VERSION),
        ("gitMajor", KUBERNETES_VERSION.split(".")[0].lstrip("v")),
        ("gitMinor", KUBERNETES_VERSION.split(".")[1]),
        ("gitTreeState", "clean"),
    )
)


@dataclass(frozen=True)
class Tool:
    name: str
    version: str
    wrapper: str | None = None
    """Directory under gomod/ holding the wrapper module, built with `go build ./<package>`."""
    package: str = "."
    install: str | None = None
    """`go install` target, for modules that build as published."""
    ldflags: str = ""


def _kubernetes(name: str) -> Tool:
    return Tool(
        name, KUBERNETES_VERSION, wrapper="kubernetes", package=f"./{name}", ldflags=_K8S_LDFLAGS
    )


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("etcd", ETCD_VERSION, wrapper="etcd"),
        *(
            _kubernetes(name)
            for name in (
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubelet",
                "kube-proxy",
                "kubectl",
            )
        ),
        Tool("pause", PAUSE_VERSION, wrapper="pause"),
        Tool("coredns", COREDNS_VERSION, install="github.com/coredns/coredns"),
        Tool("versitygw", VERSITYGW_VERSION, install="github.com/versity/versitygw/cmd/versitygw"),
        Tool(
            "helm",
            HELM_VERSION,
            install="helm.sh/helm/v3/cmd/helm",
            ldflags=f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
        ),
    )
}


def path_of(name: str) -> Path:
    tool = TOOLS[name]
    recipe = hashlib.sha256(f"{tool.wrapper}|{tool.package}|{tool.install}|{tool.ldflags}".encode())
    return cache.root() / "bin" / f"{tool.name}-{tool.version}-{recipe.hexdigest()[:8]}"


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    env["CGO_ENABLED"] = "0"
    return env


_ANNOUNCED: set[str] = set()


def ensure(name: str) -> Path:
    """The tool's binary, built first if the cache does not have it."""
    tool, target = TOOLS[name], path_of(name)
    if target.exists():
        if name not in _ANNOUNCED:
            _ANNOUNCED.add(name)
            cache.record(f"{name} {tool.version}", "reused", 0.0)
        return target
    with cache.locked(f"build-{name}"):
        if target.exists():
            return target
        if shutil.which("go") is None:
            raise RuntimeError("Go is needed to build the test servers; install Go 1.24+")
        target.parent.mkdir(parents=True, exist_ok=True)
        cache.say(f"building {name} {tool.version} from its Go module (first run only)")
        with cache.timed(f"{name} {tool.version}", "built"):
            partial = target.with_suffix(f".part{os.getpid()}")
            if tool.wrapper:
                subprocess.run(
                    [
                        "go",
                        "build",
                        "-trimpath",
                        f"-ldflags={tool.ldflags}",
                        "-o",
                        str(partial),
                        tool.package,
                    ],
                    cwd=GOMOD / tool.wrapper,
                    env=_go_env(),
                    check=True,
                )
            else:
                with tempfile.TemporaryDirectory() as gobin:
                    subprocess.run(
                        [
                            "go",
                            "install",
                            "-trimpath",
                            f"-ldflags={tool.ldflags}",
                            f"{tool.install}@{tool.version}",
                        ],
                        env={**_go_env(), "GOBIN": gobin},
                        check=True,
                    )
                    shutil.move(str(Path(gobin) / Path(tool.install or "").name), partial)
            partial.replace(target)
    return target


def ensure_all() -> dict[str, Path]:
    return {name: ensure(name) for name in TOOLS}
