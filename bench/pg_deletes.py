"""What a delete costs on PostgreSQL: a clear and a prune of one 1,000-row conversation (500
turns), through ``ChatHistoryManager`` on a throwaway cluster (a local unix socket, fsync off, as
the tests start it), as the database's superuser and as an ordinary member role; and an append
at the retention limit (200 rows kept: each append deletes the oldest turn, 2 rows). Medians in
ms of ``--repeat`` runs (the append: 20 times as many), each clear and prune on a freshly
seeded conversation.

``--server PATH`` imports the server from another checkout's ``server`` folder, so the figures
of schema version 6 (a plain ``DELETE``) and 7 (rows flagged ``gone`` as the caller, deleted by
the owner's trigger) are measured side by side, each in a database of its own."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.pgcluster import Cluster  # noqa: E402

ROWS = 1_000

_WORKER = """
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from chat_history.service.manager import ChatHistoryManager
from chat_history.model import Key, Message
from chat_history.settings import load_settings
from chat_history.store.postgres import PostgresStore

url, rows, repeat = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
keep = load_settings({"maxMessages": 1_000_000, "maxTokens": 0, "maxAgeHours": 0}).settings
two = load_settings({"maxMessages": 2, "maxTokens": 0, "maxAgeHours": 0}).settings
manager = ChatHistoryManager(PostgresStore(url, purge_seconds=3600), keep)
try:  # the service's families (this checkout); --server's older ones: the manager's methods
    from chat_history.service.history import append, clear
    from chat_history.service.usage import retain
except ImportError:
    append, clear = ChatHistoryManager.append, ChatHistoryManager.clear
    retain = ChatHistoryManager.retain


def under(settings):  # the manager under ``settings`` (older checkouts: set on it)
    global manager
    if hasattr(manager, "under"):
        manager = manager.under(settings)
    else:
        manager.settings = settings


def seed(key):
    batch = []
    for n in range(rows // 2):
        batch += [Message(role="user", content=f"question {n} about the index and the cursor"),
                  Message(role="assistant", content=f"answer {n}: the function returns rows")]
    under(keep)
    append(manager, key, batch)


figures = {"clear": [], "prune": []}
for n in range(repeat):
    key = Key("ws", f"c{n}")
    seed(key)
    began = time.perf_counter()
    assert clear(manager, key) == rows
    figures["clear"].append((time.perf_counter() - began) * 1000)
    seed(key)
    under(two)
    began = time.perf_counter()
    plan = retain(manager, key)
    figures["prune"].append((time.perf_counter() - began) * 1000)
    assert plan.report.dropped_messages == rows - 2
    under(keep)
    clear(manager, key)
# The common case: an append at the retention limit, which deletes the oldest turn (2 rows).
under(load_settings({"maxMessages": 200, "maxTokens": 0, "maxAgeHours": 0}).settings)
key = Key("ws", "steady")
for n in range(110):
    turn = [Message(role="user", content=f"q {n}"), Message(role="assistant", content="a")]
    append(manager, key, turn)
figures["append at the limit"] = []
for n in range(20 * repeat):
    turn = [Message(role="user", content=f"more {n}"), Message(role="assistant", content="b")]
    began = time.perf_counter()
    append(manager, key, turn)
    figures["append at the limit"].append((time.perf_counter() - began) * 1000)
print(json.dumps({name: statistics.median(values) for name, values in figures.items()}))
manager.close()
"""


def measure(server: Path, url: str, repeat: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, str(server), url, str(ROWS), str(repeat)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{server}: {done.stderr}")
    out = done.stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", type=Path, action="append", default=[])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    servers = [ROOT / "server", *args.server]
    cluster = Cluster()
    cluster.start()
    try:
        cluster.execute("CREATE ROLE member LOGIN")
        for round_ in range(2):  # each checkout twice, alternately
            for s, server in enumerate(servers):
                for user in ("postgres", "member"):
                    name = f"d{round_}_{s}_{user}"
                    cluster.execute(f'CREATE DATABASE "{name}"')
                    if user != "postgres":  # the superuser (the owner) sets the schema up
                        measure(server, cluster.url(name), 1)
                    figures = measure(server, cluster.url(name, user=user), args.repeat)
                    print(
                        f"{server}  {user:8}  clear {figures['clear']:8.1f} ms  "
                        f"prune {figures['prune']:8.1f} ms  "
                        f"append at the limit {figures['append at the limit']:6.2f} ms",
                        flush=True,
                    )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
