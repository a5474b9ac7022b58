"""`spindle local server status|stop`: the home's warm Spark server, seen and stopped."""

from __future__ import annotations

import argparse
import time
from typing import Any

from spindle.cli import render
from spindle.cli.warm_client import ServerError, command_line, request, stop
from spindle.errors import SpindleError
from spindle.local.home import home_path
from spindle.local.warm import ServerFiles, resident_bytes


def _files(args: argparse.Namespace) -> ServerFiles:
    return ServerFiles(home_path(args.home).absolute())


def _failed(error: ServerError) -> SpindleError:
    return SpindleError(reason=error.reason, message=error.message)


def server_status(files: ServerFiles) -> dict[str, Any]:
    """The server's PID, socket, version, uptime, memory and command, or `running: false`."""
    try:
        answer = request(files, {"op": "status"})
    except (OSError, ValueError):
        answer = None
    if answer is None:
        return {"running": False, "home": str(files.home)}
    if "error" in answer:
        raise SpindleError(reason=answer["error"]["reason"], message=answer["error"]["message"])
    return {
        "running": True,
        "home": str(files.home),
        "pid": answer["pid"],
        "socket": answer["socket"],
        "version": answer["version"],
        "uptimeSeconds": round(time.time() - answer["started"], 1),
        "memoryBytes": resident_bytes(answer["pid"]),
        "idleTimeoutSeconds": answer["idleTimeout"],
        "command": answer.get("command"),
        "waiting": answer.get("waiting", 0),
        "log": answer["log"],
    }


def cmd_status(args: argparse.Namespace) -> int:
    status = server_status(_files(args))
    if args.json:
        render.print_json(status)
        return 0
    out = render.console()
    if not status["running"]:
        out.print(f"No Spark server runs for {status['home']}.", markup=False)
        return 0
    command = command_line(status["command"]) if status["command"] else "idle"
    out.print(
        f"Spark server for {status['home']}\n"
        f"  PID {status['pid']}, socket {status['socket']}\n"
        f"  up {status['uptimeSeconds']:.0f} s, memory {status['memoryBytes'] / 2**20:.0f} MiB "
        f"(the server and its JVM), stops after {status['idleTimeoutSeconds']:.0f} s idle\n"
        f"  now: {command}\n"
        f"  version {status['version']}, log {status['log']}",
        markup=False,
    )
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    files = _files(args)
    try:
        pid = stop(files)
    except ServerError as error:
        raise _failed(error) from None
    if pid is None:
        render.console().print(f"No Spark server runs for {files.home}.", markup=False)
    else:
        render.console().print(f"Stopped the Spark server for {files.home} (PID {pid}).")
    return 0


def register(actions: Any, home: argparse.ArgumentParser) -> None:
    server = actions.add_parser("server", help="the home's warm Spark server")
    commands = server.add_subparsers(dest="server_action", required=True)
    status = commands.add_parser("status", parents=[home], help="PID, socket, uptime, memory")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(run=cmd_status)
    stopping = commands.add_parser("stop", parents=[home], help="stop it (after its command)")
    stopping.set_defaults(run=cmd_stop)
