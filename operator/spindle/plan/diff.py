"""The diff between two programs, in exactly the shape of Feldera's runtime status details."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class ProgramDiff:
    added_tables: tuple[str, ...] = ()
    removed_tables: tuple[str, ...] = ()
    modified_tables: tuple[str, ...] = ()
    added_views: tuple[str, ...] = ()
    removed_views: tuple[str, ...] = ()
    modified_views: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not any(getattr(self, f.name) for f in fields(self))

    def to_json(self) -> dict[str, list[str]]:
        return {f.name: list(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Diff:
    program_diff: ProgramDiff
    program_diff_error: str | None = None
    added_input_connectors: tuple[str, ...] = ()
    removed_input_connectors: tuple[str, ...] = ()
    modified_input_connectors: tuple[str, ...] = ()
    added_output_connectors: tuple[str, ...] = ()
    removed_output_connectors: tuple[str, ...] = ()
    modified_output_connectors: tuple[str, ...] = ()

    @property
    def connector_lists(self) -> dict[str, tuple[str, ...]]:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.name.endswith("_connectors")
        }

    @property
    def is_empty(self) -> bool:
        return (
            self.program_diff.is_empty
            and self.program_diff_error is None
            and not any(self.connector_lists.values())
        )

    @property
    def connectors_only(self) -> bool:
        return self.program_diff.is_empty and self.program_diff_error is None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "program_diff": self.program_diff.to_json(),
            "program_diff_error": self.program_diff_error,
        }
        body.update({name: list(value) for name, value in self.connector_lists.items()})
        return body
