"""The change plan: what changed between two programs and whether it can be bootstrapped."""

from spindle.plan.changes import Category, ObjectChange, Status
from spindle.plan.diff import Diff, ProgramDiff
from spindle.plan.estimate import Estimate, Rate, StoredSize
from spindle.plan.plan import RESTATE, Bootstrap, ChangePlan, Stored, change_id, make_plan

__all__ = [
    "RESTATE",
    "Bootstrap",
    "Category",
    "ChangePlan",
    "Diff",
    "Estimate",
    "ObjectChange",
    "ProgramDiff",
    "Rate",
    "Status",
    "Stored",
    "StoredSize",
    "change_id",
    "make_plan",
]
