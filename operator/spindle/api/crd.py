"""The Pipeline CRD, generated from the pydantic models (`make crds` writes crds/pipeline.yaml).

Pydantic's JSON Schema becomes a Kubernetes structural schema in small passes: references are
inlined, `X | None` becomes `nullable`, free-form maps preserve unknown fields, titles go.
A test fails when the committed CRD differs from what this module generates.
"""

from __future__ import annotations

from typing import Any

from spindle.api.status import PipelineStatus
from spindle.api.types import GROUP, KIND, VERSION, PipelineSpec

PLURAL = "pipelines"
SHORT_NAMES = ["spl"]
CATEGORIES = ["spindle"]

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {
        "name": "Change",
        "type": "string",
        "jsonPath": ".status.pendingChange.id",
        "description": "The change awaiting approval (spindle.dev/approve=<id>).",
    },
    {"name": "Checkpoint", "type": "string", "jsonPath": ".status.lastCheckpoint.id"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

Schema = dict[str, Any]


def _inline(node: Any, defs: dict[str, Schema]) -> Any:
    """Replace every `$ref` by the definition it names (the models have no recursion)."""
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        rest = {k: _inline(v, defs) for k, v in node.items() if k != "$ref"}
        return {**target, **rest}
    return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}


def _structural(node: Schema) -> Schema:
    """One schema node in Kubernetes' structural dialect."""
    node = {k: v for k, v in node.items() if k != "title"}
    options = node.pop("anyOf", None)
    if options is not None:
        kept = [o for o in options if o.get("type") != "null"]
        if len(kept) != 1:
            raise ValueError(f"cannot express anyOf {options} structurally")
        node = {**_structural(kept[0]), **node, "nullable": True}
    if node.get("default", "") is None:
        del node["default"]
    if "properties" in node:
        node["properties"] = {k: _structural(v) for k, v in node["properties"].items()}
    if "items" in node:
        node["items"] = _structural(node["items"])
    extra = node.get("additionalProperties")
    if extra is False:  # pruning already drops unknown fields; the API forbids both keywords
        node.pop("additionalProperties")
    elif extra is True or (node.get("type") == "object" and "properties" not in node and not extra):
        node.pop("additionalProperties", None)
        node["x-kubernetes-preserve-unknown-fields"] = True
    elif isinstance(extra, dict):
        node["additionalProperties"] = _structural(extra)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    return node


def schema_of(model: type[Any], *, mode: str) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode=mode)
    schema: Schema = _structural(_inline(raw, raw.get("$defs", {})))
    return schema


NAME_LENGTH = 63
NAME_RULE = {
    "rule": f"size(self.metadata.name) <= {NAME_LENGTH}",
    "message": f"a Pipeline's name is at most {NAME_LENGTH} characters: its driver pods carry "
    "it as a label value",
}
"""Refused at apply: a longer name would be refused later, on every driver pod the operator
creates (`DriverPodRejected`)."""


def crd() -> Schema:
    spec = schema_of(PipelineSpec, mode="validation")
    spec["description"] = "What the pipeline is: its SQL program and how to run it."
    # validation mode: the shape the operator reads back (serialization adds no field)
    status = schema_of(PipelineStatus, mode="validation")
    status["description"] = "What the operator observed and did; written only by Spindle."
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": SHORT_NAMES,
                "categories": CATEGORIES,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A SQL data pipeline run by Spindle on Spark. Its "
                            "program can change without re-ingesting history.",
                            "required": ["spec"],
                            "x-kubernetes-validations": [NAME_RULE],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


HEADER = "# Generated from operator/spindle/api/{types,status}.py by `make crds`. Do not edit.\n"


def render() -> str:
    import yaml

    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
