"""The Grafana dashboard (docs/grafana/spindle.json) queries exactly the operator's metrics:
every series it names is one `/metrics` serves, with the labels it has, and every metric the
operator serves is on it."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

from spindle.api import Phase
from spindle.k8s.metrics import Metrics, Seen

DASHBOARD = json.loads(Path("docs/grafana/spindle.json").read_text())
SERIES = re.compile(r"\b(spindle_[a-z_]+)(?:\{([^}]*)\})?")
MATCHER = re.compile(r'(\w+)\s*(?:=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def expressions(panels: list[dict[str, Any]]) -> list[str]:
    found = []
    for panel in panels:
        found += [target["expr"] for target in panel.get("targets", [])]
        found += expressions(panel.get("panels", []))  # rows
    return found


def served() -> tuple[dict[str, str], dict[str, set[str]]]:
    """Each queryable series name with its metric, and each metric's labels, from a registry
    in which every per-pipeline series exists."""
    now = datetime.datetime.now(datetime.UTC)
    metrics = Metrics()
    metrics.observed(("ns", "a"), Seen(phase=Phase.AWAITING_APPROVAL, since=now))
    metrics.observed(("ns", "b"), Seen(phase=Phase.RUNNING, checkpoint_at=now))
    names: dict[str, str] = {}
    labels: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for suffix in SUFFIXES[family.type]:
            names[family.name + suffix] = family.name
        labels[family.name] = {k for s in family.samples for k in s.labels if k != "le"}
    return names, labels


def test_every_series_the_dashboard_queries_is_served_with_its_labels() -> None:
    names, labels = served()
    exprs = expressions(DASHBOARD["panels"])
    assert exprs
    for expr in exprs:
        used: set[str] = set()
        for series, matchers in SERIES.findall(expr):
            assert series in names, f"{series} is not a metric the operator serves: {expr}"
            have = labels[names[series]]
            used |= have
            for label, value in MATCHER.findall(matchers):
                assert label in have, f"{series} has no label {label}: {expr}"
                if label == "phase":
                    assert value in {p.value for p in Phase}, expr
        for grouping in GROUPING.findall(expr):
            for label in filter(None, (part.strip() for part in grouping.split(","))):
                assert label in used | {"le"}, f"no series in {expr!r} has {label}"


def test_every_metric_the_operator_serves_is_on_the_dashboard() -> None:
    names, labels = served()
    exprs = expressions(DASHBOARD["panels"])
    queried = {names.get(s, s) for expr in exprs for s, _ in SERIES.findall(expr)}
    assert queried == set(labels)
    assert set(labels) >= {
        "spindle_reconcile_duration_seconds",
        "spindle_pipelines",
        "spindle_pending_changes_age_seconds",
        "spindle_bootstrap_duration_seconds",
        "spindle_checkpoint_age_seconds",
    }


def test_every_panel_reads_the_chosen_prometheus() -> None:
    [variable] = DASHBOARD["templating"]["list"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    for panel in DASHBOARD["panels"]:
        assert panel["datasource"]["uid"] == "${" + variable["name"] + "}"
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"])
