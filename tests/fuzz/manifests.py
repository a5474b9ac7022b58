"""Seeded mutations of a Pipeline manifest, for the CLI (`spindle local apply -f`, `spindle plan
-f`) and the operator on a real API server alike.

A manifest mutant starts from a well-formed Pipeline (the caller's: its storage differs between
a local home and a cluster namespace) and breaks one part of it: a wrong type, an unknown field,
a missing or huge `sql`, a bad storage URI, a Secret that does not exist, negative or enormous
resources, an invalid `desiredState`, broken YAML, or a YAML bomb. Its program may also be
mutated by the program fuzzer's own text mutations (`tests.fuzz.mutations`), so the spec side
and the SQL side share one mutator. `manifest_mutant(index, seed=..., base=...)` is a pure
function of its arguments, like `mutations.mutant`.

Every mutant keeps `metadata.name` (`m<index>`), so an API server's answer can be matched to it,
and never asks for a driver: `Stopped` is the only valid state here (a `Paused` pipeline keeps its
driver, paused), so an accepted mutant costs a reconcile, not a Spark process.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from tests.fuzz.mutations import TEXT_MUTATIONS

Document = dict[str, Any]
PATHS = (
    ("apiVersion",),
    ("kind",),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec",),
    ("spec", "sql"),
    ("spec", "bootstrapPolicy"),
    ("spec", "desiredState"),
    ("spec", "storage"),
    ("spec", "storage", "uri"),
    ("spec", "storage", "endpoint"),
    ("spec", "storage", "credentials"),
    ("spec", "storage", "credentials", "accessKeyId"),
    ("spec", "storage", "credentials", "accessKeyId", "name"),
    ("spec", "storage", "deleteOnPipelineDeletion"),
    ("spec", "spark"),
    ("spec", "spark", "mode"),
    ("spec", "spark", "executorInstances"),
    ("spec", "spark", "conf"),
    ("spec", "spark", "driver"),
    ("spec", "spark", "driver", "memory"),
    ("spec", "outputs"),
    ("spec", "outputs", "onBootstrap"),
    ("spec", "runtimeVersion"),
    ("spec", "serviceAccountName"),
)
"""Where a value may be replaced (never `metadata.name`: it identifies the mutant)."""
WRONG_VALUES: tuple[Any, ...] = (
    42,
    -1,
    3.5,
    True,
    None,
    [],
    ["a", 1],
    {},
    {"nested": {"deeper": [1, 2]}},
    "text",
    "",
    10**30,
    "1e400",
)
UNKNOWN_FIELDS = ("sqll", "Sql", "replicas", "storageUri", "extra", "spec", "x-y", "😀", "")
BAD_URIS = (
    "",
    " ",
    "bucket/prefix",
    "s3://",
    "s3:///prefix",
    "s3://bucket with spaces/p",
    "s3://" + "b" * 300 + "/p",
    "s3://../../etc",
    "ftp://host/path",
    "gs://bucket/prefix",
    "http://127.0.0.1:1/p",
    "file:relative/path",
    "file://",
    "s3://b/p\x00q",
    "s3://b/p?versionId=1#frag",
    "\u202es3://reversed",
    "S3://UPPER/prefix",
    "s3://nosuchbucket-spindle-fuzz/p",
)
BAD_QUANTITIES: tuple[Any, ...] = (
    "-1",
    "-5Gi",
    "0",
    "1e400",
    "99999999999999999999999Ei",
    "lots",
    "",
    "1.5.5Gi",
    "512Ti",
    "2Gb",
    -3,
    10**20,
)
BAD_INSTANCES: tuple[Any, ...] = (-1, 0, 10**6, 2**63, "two", 1.5)
BAD_STATES: tuple[Any, ...] = ("running", "Start", "", "Deleted", "RUNNING", "Running ", 1, [])
QUIET_STATES = ("Stopped",)
"""What a mutant may ask for: never a driver."""
MIB = 1024 * 1024
HUGE_SQL = (MIB, 2 * MIB + 1, 4 * MIB)
"""Under the API server's request limit, over the program limit (2 MiB), over the request limit
(3 MiB)."""


def _parent(document: Document, path: tuple[str, ...]) -> dict[str, Any]:
    """The mapping that holds `path`'s last key, created along the way (a scalar in the way is
    replaced by a mapping: the mutant is broken either way)."""
    node = document
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    return node


def wrong_type(rng: random.Random, document: Document) -> Document:
    path = rng.choice(PATHS)
    _parent(document, path)[path[-1]] = copy.deepcopy(rng.choice(WRONG_VALUES))
    return document


def unknown_field(rng: random.Random, document: Document) -> Document:
    where = rng.choice([p for p in PATHS if len(p) < 4] + [()])
    parent = _parent(document, (*where, "-"))
    name = rng.choice(UNKNOWN_FIELDS)
    parent[name if name not in parent else f"{name}2"] = rng.choice(WRONG_VALUES)
    return document


def missing_sql(rng: random.Random, document: Document) -> Document:
    spec = _parent(document, ("spec", "sql"))
    choice = rng.randrange(4)
    if choice == 0:
        spec.pop("sql", None)
    else:
        spec["sql"] = ("", "   \n\t", "-- only a comment\n")[choice - 1]
    return document


def huge_sql(rng: random.Random, document: Document) -> Document:
    spec = _parent(document, ("spec", "sql"))
    size = rng.choice(HUGE_SQL)
    sql = str(spec.get("sql") or "create table t (a int);")
    spec["sql"] = sql + "\n-- " + "x" * size
    return document


def bad_storage_uri(rng: random.Random, document: Document) -> Document:
    _parent(document, ("spec", "storage", "uri"))["uri"] = rng.choice(BAD_URIS)
    return document


def missing_secret(rng: random.Random, document: Document) -> Document:
    credentials = _parent(document, ("spec", "storage", "credentials", "-"))
    which = rng.choice(("accessKeyId", "secretAccessKey"))
    reference = {"name": "s3", "key": which}
    if rng.random() < 0.5:
        reference["name"] = f"no-such-secret-{rng.randrange(1000)}"
    else:
        reference["key"] = "noSuchKey"
    credentials[which] = reference
    other = "secretAccessKey" if which == "accessKeyId" else "accessKeyId"
    credentials.setdefault(other, {"name": "s3", "key": other})
    return document


def bad_resources(rng: random.Random, document: Document) -> Document:
    spark = _parent(document, ("spec", "spark", "-"))
    if rng.random() < 0.25:
        spark["executorInstances"] = rng.choice(BAD_INSTANCES)
        return document
    role = rng.choice(("driver", "executor"))
    resources = spark.setdefault(role, {})
    if not isinstance(resources, dict):
        resources = spark[role] = {}
    resources[rng.choice(("cpu", "memory"))] = rng.choice(BAD_QUANTITIES)
    return document


def invalid_desired_state(rng: random.Random, document: Document) -> Document:
    _parent(document, ("spec", "desiredState"))["desiredState"] = rng.choice(BAD_STATES)
    return document


def sql_mutation(rng: random.Random, document: Document) -> Document:
    """One of the program fuzzer's text mutations, applied to `spec.sql` (the 10 MB program
    is `huge_sql`'s business here)."""
    spec = _parent(document, ("spec", "sql"))
    name = rng.choice([m for m in TEXT_MUTATIONS if m != "huge_program"])
    spec["sql"] = TEXT_MUTATIONS[name](rng, str(spec.get("sql") or ""))
    return document


DOCUMENT_MUTATIONS: dict[str, Callable[[random.Random, Document], Document]] = {
    "wrong_type": wrong_type,
    "unknown_field": unknown_field,
    "missing_sql": missing_sql,
    "huge_sql": huge_sql,
    "bad_storage_uri": bad_storage_uri,
    "missing_secret": missing_secret,
    "bad_resources": bad_resources,
    "invalid_desired_state": invalid_desired_state,
    "sql_mutation": sql_mutation,
}


def billion_laughs(rng: random.Random, document: Document) -> str:
    """The classic bomb: nine or more levels of ten aliases each (10^9 strings once expanded),
    where the schema allows any value (`metadata`), where it does not (`spec`), or as the
    program itself."""
    depth = rng.randint(9, 12)
    levels = ["l0: &l0 lol"] + [
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, depth)
    ]
    bomb = "{" + ", ".join(levels) + "}"
    where = rng.choice(("metadata", "spec", "sql"))
    if where == "sql" and isinstance(document.get("spec"), dict):
        document["spec"].pop("sql", None)
    text = yaml.safe_dump(document, sort_keys=False)
    text = text.replace("metadata:\n", f"metadata:\n  laughs: {bomb}\n", 1)
    if where == "spec":
        return text.replace("spec:\n", f"spec:\n  laughs: *l{depth - 1}\n", 1)
    if where == "sql":
        return text.replace("spec:\n", f"spec:\n  sql: *l{depth - 1}\n", 1)
    return text


def broken_yaml(rng: random.Random, document: Document) -> str:
    text = yaml.safe_dump(document, sort_keys=False)
    choice = rng.randrange(5)
    if choice == 0:
        return text[: rng.randrange(len(text) // 2, len(text))] + '\n  sql: "unclosed\n'
    if choice == 1:
        return text.replace("  ", "\t", 1)
    if choice == 2:
        return text + "spec: {duplicate: mapping}\n  bad: indentation\n"
    if choice == 3:
        return text.replace("kind:", "kind: [", 1)
    return "--- !!python/object/apply:os.system ['true']\n" + text


TEXT_MUTATIONS_OF_FILES: dict[str, Callable[[random.Random, Document], str]] = {
    "billion_laughs": billion_laughs,
    "broken_yaml": broken_yaml,
}
MANIFEST_MUTATIONS = (*DOCUMENT_MUTATIONS, *TEXT_MUTATIONS_OF_FILES)


@dataclass(frozen=True)
class ManifestMutant:
    index: int
    name: str
    """`metadata.name`: how an API server's answer is matched to the mutant."""
    mutations: tuple[str, ...]
    document: Document | None
    """The mutated manifest, or None when only its text exists (a bomb, broken YAML)."""
    text: str
    """The manifest as a file holds it (YAML)."""


def manifest_mutant(index: int, *, seed: int, base: Document) -> ManifestMutant:
    """Mutant number `index`: stopped, then one mutation drawn evenly from all of them,
    sometimes after one more document mutation."""
    rng = random.Random(f"manifest:{seed}:{index}")
    document = copy.deepcopy(base)
    name = f"m{index:05d}"
    document.setdefault("metadata", {})["name"] = name
    document.setdefault("spec", {})["desiredState"] = rng.choice(QUIET_STATES)
    applied = [rng.choice(list(DOCUMENT_MUTATIONS))] if rng.random() < 0.3 else []
    applied.append(rng.choice(MANIFEST_MUTATIONS))
    for mutation in applied:
        if mutation in DOCUMENT_MUTATIONS:
            document = DOCUMENT_MUTATIONS[mutation](rng, document)
    spec = document.get("spec")
    if isinstance(spec, dict) and spec.get("desiredState") in (None, "Running"):
        spec["desiredState"] = QUIET_STATES[0]  # a null or missing state would mean Running
    if applied[-1] in TEXT_MUTATIONS_OF_FILES:
        text = TEXT_MUTATIONS_OF_FILES[applied[-1]](rng, document)
        return ManifestMutant(index, name, tuple(applied), None, text)
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    return ManifestMutant(index, name, tuple(applied), document, text)
