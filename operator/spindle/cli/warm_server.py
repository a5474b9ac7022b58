"""The warm server of one `--home`: a long-lived Python and Spark process that runs the local
commands its clients send, one at a time, on one SparkContext (`runtime.session`).

`python -m spindle.cli.warm_server --home H --idle-timeout S`, started by the client
(`cli.warm_client`). It listens on a Unix socket only its owner can open, greets each
connection with its version, and serves a request only with the home's token. A command runs
as `spindle` would run it in the client's directory and environment; its output goes back to
the client as it is written. SIGTERM (what `spindle local stop` sends to a run's process)
finishes the command in progress, a run's step included, and then ends the server; so does
`spindle local server stop` and an idle timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spindle.cli import served
from spindle.local.warm import ServerFiles, cancellable, started, version

REQUEST_TIMEOUT = 30.0


class Relay:
    """A text stream that sends what is written to the client, as `out` or `err` frames."""

    def __init__(self, send: Any, kind: str, *, tty: bool) -> None:
        self.send, self.kind, self.tty = send, kind, tty
        self.encoding = "utf-8"

    def write(self, text: str) -> int:
        if text:
            self.send({self.kind: text})
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return self.tty


@dataclass
class Server:
    files: ServerFiles
    token: str
    idle_timeout: float
    started: float = field(default_factory=time.time)
    last_active: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0
    counting: threading.Lock = field(default_factory=threading.Lock)
    cancelling: threading.Lock = field(default_factory=threading.Lock)
    command: list[str] | None = None
    stop_command: threading.Event | None = None
    exiting: threading.Event = field(default_factory=threading.Event)
    version: str = field(default_factory=version)
    """The version of the code this server loaded, taken when it starts: sources edited later
    make it stale, and a client of the new sources replaces it."""

    def state(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "socket": self.files.socket_path(),
            "version": self.version,
            "started": self.started,
            "process": started(os.getpid()),
            "idleTimeout": self.idle_timeout,
            "log": str(self.files.log_path),
        }

    def shut_down(self) -> None:
        """Finish the command in progress (a run ends after its step), then exit. A query or a
        preview runs to its end: its stop event is its client's (`cancellable`), and setting
        it here cancelled a preview when another terminal's command replaced the server."""
        self.exiting.set()
        with self.cancelling:
            stop, command = self.stop_command, self.command
        if stop is not None and not cancellable(command or []):
            stop.set()

    def idle(self) -> bool:
        return self.waiting == 0 and time.monotonic() - self.last_active > self.idle_timeout

    # one connection ---------------------------------------------------------------------------

    def attend(self, conn: socket.socket) -> None:
        """Handle a connection the loop counted (`waiting`) when it accepted it."""
        try:
            self.handle(conn)
        finally:
            self.count(-1)

    def handle(self, conn: socket.socket) -> None:
        sending = threading.Lock()
        gone = threading.Event()

        def send(frame: dict[str, Any]) -> None:
            if gone.is_set():
                return
            try:
                with sending:
                    conn.sendall((json.dumps(frame) + "\n").encode())
            except OSError:
                gone.set()

        with conn, conn.makefile("r", encoding="utf-8") as reader:
            # `busy`: the command it runs now, which a request would wait for (a client runs
            # a command that needs no Spark itself instead)
            send({"version": self.version, "pid": os.getpid(), "busy": self.command})
            conn.settimeout(REQUEST_TIMEOUT)
            try:
                request = json.loads(reader.readline() or "{}")
            except (OSError, ValueError):
                return
            conn.settimeout(None)
            if not hmac.compare_digest(str(request.get("token")), self.token):
                send({"error": self.rejected()})
                return
            op = request.get("op")
            if op == "status":
                send({**self.state(), "command": self.command, "waiting": self.waiting - 1})
            elif op == "stop":
                command = self.command  # the one it finishes before it ends
                self.shut_down()
                send({"stopping": True, "command": command})
            elif op == "run":
                self.serve(request, send, reader, gone)

    def rejected(self) -> dict[str, str]:
        home = self.files.home
        return {
            "reason": "ServerTokenRejected",
            "message": f"The Spark server for {home} (PID {os.getpid()}) did not accept the "
            f"token in {self.files.token_path}: the file changed after the server started. "
            f"Stop the server with `spindle local server stop --home {home}` and run the "
            "command again (a new server writes a new token), or add --no-server.",
        }

    def serve(self, request: dict[str, Any], send: Any, reader: Any, gone: threading.Event) -> None:
        stop = threading.Event()

        def stopped() -> None:
            """The client's Ctrl-C or SIGTERM, or its departure: a run stops after its step;
            a query or a preview (`cancellable`) is cancelled, its Spark jobs with it (a
            query went on, holding the server, after its client had left)."""
            stop.set()
            with self.cancelling:  # not the next command's jobs, once this one has ended
                if self.stop_command is stop and cancellable(request["argv"]):
                    from spindle.runtime.session import cancel_shared

                    with contextlib.suppress(Exception):  # no context yet, or it is stopping
                        cancel_shared()

        def watch() -> None:
            for line in reader:
                with contextlib.suppress(ValueError):
                    if json.loads(line).get("op") == "stop":
                        stopped()
            gone.set()
            stopped()

        threading.Thread(target=watch, daemon=True).start()
        with self.lock:
            if self.exiting.is_set():
                send({"retry": True})
                return
            if stop.is_set():  # its client stopped it, or left, while it waited its turn
                send({"exit": 130})
                return
            self.idle_timeout = float(request.get("idle_timeout", self.idle_timeout))
            self.command, self.stop_command = list(request["argv"]), stop
            try:
                code = self.run(request, send, stop)
            finally:
                with self.cancelling:
                    self.command, self.stop_command = None, None
                self.last_active = time.monotonic()
        send({"exit": code})

    def count(self, change: int) -> None:
        with self.counting:
            self.waiting += change

    def run(self, request: dict[str, Any], send: Any, stop: threading.Event) -> int:
        from spindle.cli.main import run_here

        environ, cwd = dict(os.environ), os.getcwd()
        streams = sys.stdout, sys.stderr
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ["COLUMNS"] = str(request.get("columns", 80))
        token = served.STOP.set(stop)
        try:
            sys.stdout = Relay(send, "out", tty=bool(request["tty"]["out"]))
            sys.stderr = Relay(send, "err", tty=bool(request["tty"]["err"]))
            os.chdir(request["cwd"])
            return run_here(request["argv"])
        except SystemExit as exit:  # argparse's usage errors
            return exit.code if isinstance(exit.code, int) else 2
        except BaseException:  # to the client, which saw nothing (SPINDLE_DEBUG's traceback)
            traceback.print_exc(file=sys.stderr)
            traceback.print_exc(file=streams[1])
            return 2
        finally:
            served.STOP.reset(token)
            sys.stdout, sys.stderr = streams
            os.environ.clear()
            os.environ.update(environ)
            os.chdir(cwd)


def serve(*, home: Path, idle_timeout: float) -> None:
    from spindle.runtime.session import share_sessions, stop_shared

    files = ServerFiles(home)
    token = files.token()
    if token is None:
        raise SystemExit(f"no token in {files.token_path}; a client starts the server")
    server = Server(files=files, token=token, idle_timeout=idle_timeout)
    share_sessions()
    path = files.socket_path()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)  # the socket is created 0600: only its owner can connect
    try:
        listener.bind(path)
    finally:
        os.umask(old_mask)
    listener.listen(16)
    listener.settimeout(0.5)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: server.shut_down())
    files.save_state(server.state())
    print(f"serving {home} on {path} (PID {os.getpid()}, {server.version})", flush=True)
    try:
        while not (server.exiting.is_set() and server.waiting == 0) and not server.idle():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            server.last_active = time.monotonic()  # not idle while a new client is greeted
            # counted here, not in its thread: the loop could end before the thread counted
            # it, and the server's exit cut the client off mid-command
            server.count(+1)
            threading.Thread(target=server.attend, args=(conn,), daemon=True).start()
    finally:
        files.clear(pid=os.getpid())
        listener.close()
        reason = "idle" if not server.exiting.is_set() else "asked to stop"
        print(f"stopping ({reason})", flush=True)
        stop_shared()


def main() -> None:
    parser = argparse.ArgumentParser(prog="spindle-warm-server")
    parser.add_argument("--home", required=True)
    parser.add_argument("--idle-timeout", type=float, required=True)
    args = parser.parse_args()
    serve(home=Path(args.home), idle_timeout=args.idle_timeout)


if __name__ == "__main__":
    main()
