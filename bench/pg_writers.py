"""Concurrent writers on PostgreSQL: N processes (each a ``ChatHistoryManager`` on its own
connection) append one turn at a time, either each to its own conversation or all to one, on a
throwaway cluster (a local unix socket, fsync off, as the tests start it). Prints appends per
second. ``--hold-ms`` keeps every write open that long after its locks (a stand-in for the round
trips of a database across a network, where a lock of the whole database costs most).

``--server PATH`` imports the server from another checkout's ``server`` folder (the figures of
an older locking scheme, side by side)."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.pgcluster import Cluster  # noqa: E402

_WORKER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from chat_history.service.manager import ChatHistoryManager
from chat_history.model import Key, Message
from chat_history.settings import load_settings
from chat_history.store.postgres import PostgresStore

try:  # the service's families (this checkout); --server's older ones: the manager's methods
    from chat_history.service.history import append
except ImportError:
    append = ChatHistoryManager.append

url, conversation, rounds, hold, start = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(
    sys.argv[5]
), float(sys.argv[6])
keep = load_settings({"maxMessages": 1_000_000, "maxTokens": 0, "maxAgeHours": 0}).settings
manager = ChatHistoryManager(PostgresStore(url), keep)


class Hold:
    def before_write(self, transaction):
        time.sleep(hold)

    def after_write(self, transaction):
        pass

    def write_failed(self):
        pass


key = Key("ws", conversation)
append(manager, key, [Message(role="user", content="warm up")])
if hold:
    manager.store.observer = Hold()
while time.time() < start:
    time.sleep(0.001)
began = time.perf_counter()
for n in range(rounds):
    turn = [Message(role="user", content=f"q {n}"), Message(role="assistant", content="a")]
    append(manager, key, turn)
print(time.perf_counter() - began)
manager.close()
"""


def run(url: str, server: Path, workers: int, shared: bool, rounds: int, hold_ms: float) -> float:
    """Appends per second of ``workers`` processes, from one start to the last one's end."""
    start = time.time() + 2.0
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(server),
                url,
                "shared" if shared else f"own-{w}",
                str(rounds),
                str(hold_ms / 1000),
                str(start),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    elapsed = []
    for process in processes:
        out, _ = process.communicate(timeout=600)
        if process.returncode != 0:
            raise SystemExit(f"a worker failed ({process.returncode})")
        elapsed.append(float(out.strip().splitlines()[-1]))
    return workers * rounds / max(elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hold-ms", type=float, nargs="*", default=[0.0, 2.0])
    parser.add_argument("--server", type=Path, default=ROOT / "server")
    args = parser.parse_args()
    cluster = Cluster()
    cluster.start()
    try:
        for hold in args.hold_ms:
            for shared in (False, True):
                figures = []
                for attempt in range(args.repeat):
                    name = f"writers_{attempt}"
                    url = cluster.fresh_database(name)
                    figures.append(
                        run(url, args.server.resolve(), args.workers, shared, args.rounds, hold)
                    )
                    cluster.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                where = "one conversation" if shared else "own conversations"
                print(
                    f"{args.workers} processes, {where}, hold {hold:g} ms: "
                    f"{statistics.median(figures):.0f} appends/s "
                    f"(runs: {', '.join(f'{f:.0f}' for f in figures)})",
                    flush=True,
                )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
