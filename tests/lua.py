"""Argo CD's Lua customizations (docs/argocd) run by a real Lua 5.1 interpreter (lupa; Argo CD's
gopher-lua is Lua 5.1), with the resource as the global `obj`, as Argo CD runs them; Lua tables
come back as dicts and lists."""

from __future__ import annotations

from typing import Any

from lupa.lua51 import LuaError, LuaRuntime, lua_type

__all__ = ["LuaError", "from_lua", "run"]


def run(script: str, *, obj: dict[str, Any]) -> Any:
    """The script's return value, as Python (a table with keys 1..n is a list)."""
    lua = LuaRuntime(unpack_returned_tuples=True)

    def to_lua(value: Any) -> Any:
        if isinstance(value, dict):
            return lua.table_from({k: to_lua(v) for k, v in value.items()})
        if isinstance(value, list):
            return lua.table_from([to_lua(v) for v in value])
        return value

    lua.globals().obj = to_lua(obj)
    return from_lua(lua.execute(script))


def from_lua(value: Any) -> Any:
    if lua_type(value) != "table":
        return value
    items = {key: from_lua(item) for key, item in value.items()}
    if items and list(items) == list(range(1, len(items) + 1)):
        return list(items.values())
    return items
