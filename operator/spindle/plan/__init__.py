"""The change plan: what changed between two programs and whether it can be bootstrapped."""

from spindle.plan.changes import Category, ObjectChange, Status
from spindle.plan.diff import Diff, ProgramDiff
from spindle.plan.plan import Bootstrap, ChangePlan, change_id, make_plan

__all__ = [
    "Bootstrap",
    "Category",
    "ChangePlan",
    "Diff",
    "ObjectChange",
    "ProgramDiff",
    "Status",
    "change_id",
    "make_plan",
]
