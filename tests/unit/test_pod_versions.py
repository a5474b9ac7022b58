"""How fresh a reconcile's list of its pipeline's pods must be (`PodVersions`): never older than
any version of its pods the operator has seen, nor than its first, consistent, list of pods."""

from __future__ import annotations

from spindle.k8s.cluster import PodVersions


def test_only_the_first_list_is_consistent_and_bounds_every_unseen_pipeline() -> None:
    versions = PodVersions()
    assert versions.floor("ns", "a") is None  # the process's first list: a consistent read
    versions.saw("ns", "a", "100", consistent=True)
    assert versions.floor("ns", "b") == "100"  # pods created before that list are in any later
    versions.saw("ns", "b", "150", consistent=True)  # a later consistent read (a 504's fallback)
    assert versions.first == "100" and versions.floor("ns", "c") == "100"


def test_a_pipelines_floor_only_moves_forward() -> None:
    versions = PodVersions(first="100")
    versions.saw("ns", "a", "120")  # a pod it created
    versions.saw("ns", "a", "110")  # a watch event of an earlier change, delivered later
    assert versions.floor("ns", "a") == "120"
    versions.saw("ns", "a", "1000")  # compared as numbers, not as text
    assert versions.floor("ns", "a") == "1000"
    versions.saw("other", "a", "90")
    assert versions.floor("other", "a") == "90"  # per namespace and name
    versions.forget("ns", "a")
    assert versions.floor("ns", "a") == "100"
