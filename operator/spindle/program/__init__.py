"""The program model: parse a Spindle SQL program into typed, immutable objects (pure, no I/O)."""

from spindle.program.fingerprint import Fingerprints, fingerprint
from spindle.program.model import (
    Column,
    Connector,
    Direction,
    Function,
    Position,
    Program,
    Table,
    View,
)
from spindle.program.parse import parse_program

__all__ = [
    "Column",
    "Connector",
    "Direction",
    "Fingerprints",
    "Function",
    "Position",
    "Program",
    "Table",
    "View",
    "fingerprint",
    "parse_program",
]
