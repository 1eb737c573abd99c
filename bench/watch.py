"""The change watch on a big workspace (issue 35 item 15): window B, a server on a workspace of
``--conversations`` conversations, answers small requests while window A, another server on the
same workspace and database, appends a turn every ``--interval`` seconds. Prints B's median
small-request latency and its CPU share (of one core, from /proc) while A appends, against the
same figures with A quiet, in the same run; the goal is within 1.5x and under 2 % of a core.

The control, in the same run: the same figures while window C, a server on another workspace of
the same database, appends at the same pace (the machine as loaded, the change watch with
nothing of its workspace to re-read), and on PostgreSQL the round trip of a plain ``SELECT 1``
on a connection of this process, after each request of each phase: what of the ratio is the
machine's (two cores shared by A's server, the database's backends and B), and what is ours.

``--engine postgres`` runs both on a throwaway PostgreSQL cluster (tests.pgcluster), as its
superuser, or with ``--role NAME`` as an ordinary login role (row-level security then names the
role in every lookup, as in a deployment: docs/server-database.md).
``--server PATH`` runs another checkout's ``server`` folder (the figures before a change, side
by side)."""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The server's package folder: this checkout's, or ``--server PATH`` (read before the imports).
SERVER = (
    Path(sys.argv[sys.argv.index("--server") + 1]).resolve()
    if "--server" in sys.argv[:-1]
    else ROOT / "server"
)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(SERVER))

from chat_history.client import StdioClient  # noqa: E402
from chat_history.model import Key, Message  # noqa: E402
from chat_history.service import history  # noqa: E402
from chat_history.service.manager import ChatHistoryManager  # noqa: E402
from chat_history.settings import load_settings  # noqa: E402
from chat_history.store.choice import open_store  # noqa: E402

WORKSPACE = "file:///bench/big"
OTHER = "file:///bench/other"
KEEP = {"maxMessages": 1_000_000, "maxTokens": 0, "maxAgeHours": 0}
TICK = os.sysconf("SC_CLK_TCK")


def populate(storage: Path, url: str | None, conversations: int) -> None:
    """``conversations`` conversations of one turn each in WORKSPACE, and the small one, in one
    write (the store's own insert: minutes of appends on a loaded PostgreSQL otherwise)."""
    store = open_store(storage, url)
    now = int(time.time() * 1000)
    try:
        with store.write() as tx:
            for n in range(conversations):
                rows = [(Message(role="user", content=f"q {n}"), 1, 3)]
                rows.append((Message(role="assistant", content="a"), 1, 1))
                tx.insert(Key(WORKSPACE, f"c{n:05d}"), rows, None, now)
        manager = ChatHistoryManager(store, load_settings(KEEP).settings)
        history.append(manager, Key(WORKSPACE, "small"), [Message(role="user", content="hi")])
    finally:
        store.close()


class Window:
    """A server on WORKSPACE whose answers a reader thread collects (its notifications are
    read as they come, so a full pipe never stalls it)."""

    def __init__(self, storage: Path, url: str | None, workspace: str = WORKSPACE) -> None:
        path = os.pathsep.join([str(SERVER), os.environ.get("PYTHONPATH", "")])
        # Its log to a file: a pipe nobody reads would stall it once full.
        self.log = open(storage / f"server-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
        env = {**os.environ, "PYTHONPATH": path}
        self.client = StdioClient(storage, env=env, stderr=self.log)
        options: dict[str, Any] = {"workspace": workspace, "settings": KEEP}
        if url is not None:
            options["database"] = url
        self.client.initialize(**options)
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.changed = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                message = self.client.receive()
            except (EOFError, ValueError, OSError):
                return
            if message.get("method") == "chatHistory/changed":
                self.changed += 1
            elif "id" in message and "method" not in message:
                self.answers.put(message)

    def call(self, method: str, params: Any) -> Any:
        self.client._next_id += 1
        ident = self.client._next_id
        self.client.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            answer = self.answers.get(timeout=60)
            if answer.get("id") == ident:
                return answer.get("result")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.client.process.pid}/stat").read_text().rsplit(")", 1)[1]
        parts = fields.split()
        return (int(parts[11]) + int(parts[12])) / TICK

    def close(self) -> None:
        self.call("shutdown", None)
        self.client.notify("exit")
        self.client.process.wait(30)
        self.log.close()


class Ping:
    """A plain ``SELECT 1`` round trip to the database (PostgreSQL only), in ms."""

    def __init__(self, url: str | None) -> None:
        self._connection: Any = None
        if url is not None:
            import psycopg

            self._connection = psycopg.connect(url, autocommit=True)

    def __call__(self) -> float | None:
        if self._connection is None:
            return None
        began = time.perf_counter()
        self._connection.execute("SELECT 1").fetchone()
        return (time.perf_counter() - began) * 1000


def measure(
    reader: Window, seconds: float, requests: int, ping: Ping
) -> tuple[float, float, float | None]:
    """B idle for ``seconds`` (its CPU share), then ``requests`` small requests (median ms),
    each followed by a ``ping`` (median ms, None without one)."""
    cpu, wall = reader.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    share = (reader.cpu_seconds() - cpu) / (time.monotonic() - wall)
    took, pings = [], []
    for _ in range(requests):
        began = time.perf_counter()
        reader.call("chatHistory/get", {"conversationId": "small"})
        took.append((time.perf_counter() - began) * 1000)
        pings.append(ping())
        time.sleep(0.05)
    pinged = [p for p in pings if p is not None]
    return share, statistics.median(took), statistics.median(pinged) if pinged else None


def appending(writer: Window, interval: float, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        writer.call(
            "chatHistory/append",
            {"conversationId": "busy", "messages": [{"role": "user", "content": f"turn {n}"}]},
        )
        stop.wait(interval)


def while_appending(
    writer: Window, reader: Window, args: argparse.Namespace, ping: Ping
) -> tuple[float, float, float | None]:
    stop = threading.Event()
    thread = threading.Thread(target=appending, args=(writer, args.interval, stop))
    thread.start()
    try:
        return measure(reader, args.seconds, args.requests, ping)
    finally:
        stop.set()
        thread.join()


def run(storage: Path, url: str | None, args: argparse.Namespace) -> None:
    began = time.monotonic()
    populate(storage, url, args.conversations)
    print(f"{args.conversations} conversations stored in {time.monotonic() - began:.1f} s")
    writer, reader = Window(storage, url), Window(storage, url)
    control = Window(storage, url, OTHER)
    ping = Ping(url)
    try:
        reader.call("chatHistory/get", {"conversationId": "small"})  # warm
        quiet = measure(reader, args.seconds, args.requests, ping)
        told = reader.changed
        busy = while_appending(writer, reader, args, ping)
        told = reader.changed - told
        other = while_appending(control, reader, args, ping)
    finally:
        for window in (writer, reader, control):
            window.close()
    print(f"engine {args.engine}, A appends every {args.interval} s; B was told {told}")
    phases = (("quiet", quiet), ("appending", busy), ("control", other))
    for name, (share, ms, pinged) in phases:
        line = f"  {name + ':':10} B's CPU {share * 100:5.1f} % of a core, request {ms:6.2f} ms"
        print(line + (f", SELECT 1 {pinged:5.3f} ms" if pinged is not None else ""))
    print(f"  ratio of the small request, appending / quiet: {busy[1] / quiet[1]:.2f}x")
    print(f"  control (C appends to another workspace) / quiet: {other[1] / quiet[1]:.2f}x")
    if quiet[2] is not None and busy[2] is not None:
        print(f"  SELECT 1, appending / quiet: {busy[2] / quiet[2]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between appends")
    parser.add_argument("--seconds", type=float, default=5.0, help="idle CPU window")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--server", type=Path, default=ROOT / "server", help="a server folder")
    parser.add_argument(
        "--role", help="PostgreSQL: an ordinary role to run as (default: superuser)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as folder:
        storage = Path(folder)
        if args.engine == "sqlite":
            run(storage, None, args)
            return
        from tests.pgcluster import Cluster

        cluster = Cluster()
        cluster.start()
        try:
            url = cluster.fresh_database("watch")
            if args.role:
                cluster.execute(f'CREATE ROLE "{args.role}" LOGIN')
                url = cluster.url("watch", args.role)
            run(storage, url, args)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
