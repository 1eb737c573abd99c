"""``bench/acp.py`` (issue 33, "Overhead"): what ``chat-history acp`` adds between an editor and
an agent, measured against the same agent reached directly in the same run.

- **Latency per message**: one request at a time (``session/set_mode``, answered ``{}`` by
  the agent at once), round trips through the proxy against direct; the median added.
- **Streaming**: one prompt whose reply is ``session/update`` chunks sent at 1,000 a second,
  each stamped with its sending time; the lag from the agent's write to the editor's read
  (median, p99) through the proxy against direct, with the proxy recording into SQLite.
- **Throughput**: chunks sent as fast as the agent can write them; updates a second received.

Prints the figures and writes the "ACP proxy" section of BENCHMARKS.md. ``--quick``: fewer
messages. Goals: under 1 ms added per message at the median; no visible lag at 1,000 a second."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AGENT = [sys.executable, "-m", "tests.e2e.acp_peers.raw_agent"]


class Peer:
    """A process spoken to in newline-delimited JSON-RPC."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'server'}", **env},
        )
        self.next = 0

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        return self.next

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the peer closed its output")
        value: dict[str, Any] = json.loads(line)
        return value

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = self.send(method, params)
        while True:
            message = self.read()
            if message.get("id") == rid and "method" not in message:
                return message

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


def start(through_proxy: bool, db: Path, env: dict[str, str]) -> Peer:
    argv = AGENT
    if through_proxy:
        argv = [sys.executable, "-m", "chat_history.cli", "--db", str(db), "acp", "--", *AGENT]
    peer = Peer(argv, {"ACP_RAW_MODE": "stream", **env})
    peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return peer


def latency(peer: Peer, count: int) -> float:
    """The median round trip of one request (ms)."""
    times = []
    for _ in range(count):
        began = time.perf_counter()
        peer.call("session/set_mode", {"sessionId": "s", "modeId": "m"})
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def stream(peer: Peer, cwd: str) -> tuple[list[float], float]:
    """One prompt's chunks: the lag of each (ms) and the updates a second received."""
    session = peer.call("session/new", {"cwd": cwd, "mcpServers": []})["result"]["sessionId"]
    rid = peer.send("session/prompt", {"sessionId": session, "prompt": [_text("go")]})
    lags, began, received = [], time.monotonic(), 0
    while True:
        message = peer.read()
        if message.get("id") == rid:
            break
        text = message["params"]["update"]["content"]["text"]
        if text[:1].isdigit():
            lags.append((time.monotonic() - float(text)) * 1000)
            received += 1
    return lags, received / (time.monotonic() - began)


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def p99(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.99) - 1]


def measure(quick: bool) -> dict[str, dict[str, float]]:
    count, updates = (300, 1000) if quick else (2000, 5000)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        db, cwd = Path(folder) / "h.db", Path(folder)
        for name, proxied in (("direct", False), ("proxy", True)):
            row: dict[str, float] = {}
            paced = {"ACP_RAW_UPDATES": str(updates), "ACP_RAW_RATE": "1000"}
            peer = start(proxied, db, paced)
            latency(peer, 50)  # warm up
            row["latency"] = latency(peer, count)
            lags, _ = stream(peer, str(cwd))
            row["lag median"], row["lag p99"] = statistics.median(lags), p99(lags)
            peer.close()
            peer = start(proxied, db, {"ACP_RAW_UPDATES": str(updates * 4), "ACP_RAW_RATE": "1e9"})
            _, row["throughput"] = stream(peer, str(cwd))
            peer.close()
            results[name] = row
            print(name, row, flush=True)
    return results


def write_section(results: dict[str, dict[str, float]], quick: bool) -> None:
    direct, proxy = results["direct"], results["proxy"]
    load = f"{os.getloadavg()[0]:.1f}"
    section = "\n".join(
        [
            "## ACP proxy",
            "",
            "`bench/acp.py`: `chat-history acp` in front of a hand-written agent "
            "(tests/e2e/acp_peers/raw_agent.py), against the same agent reached directly in the "
            f"same run{' (--quick)' if quick else ''}; the proxy records into SQLite. Load "
            f"average {load} on 2 CPUs. Goals: under 1 ms added per message at the median, no "
            "visible lag at 1,000 updates a second.",
            "",
            "| figure | direct | through the proxy | added |",
            "|---|---|---|---|",
            _row("round trip of one request, median (ms)", direct, proxy, "latency"),
            _row("lag of a session/update at 1,000/s, median (ms)", direct, proxy, "lag median"),
            _row("lag of a session/update at 1,000/s, p99 (ms)", direct, proxy, "lag p99"),
            f"| session/update as fast as the agent writes (a second) | "
            f"{direct['throughput']:,.0f} | {proxy['throughput']:,.0f} | "
            f"{proxy['throughput'] / direct['throughput']:.2f}x |",
            "",
        ]
    )
    path = ROOT / "BENCHMARKS.md"
    current = path.read_text(encoding="utf-8")
    if "## ACP proxy" in current:
        before, _, after = current.partition("## ACP proxy")
        rest = after.split("\n## ", 1)
        current = before + section + ("\n## " + rest[1] if len(rest) > 1 else "")
    else:
        current = current.rstrip("\n") + "\n\n" + section
    path.write_text(current, encoding="utf-8")
    print(section)


def _row(label: str, direct: dict[str, float], proxy: dict[str, float], key: str) -> str:
    return f"| {label} | {direct[key]:.3f} | {proxy[key]:.3f} | {proxy[key] - direct[key]:+.3f} |"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    arguments = parser.parse_args()
    write_section(measure(arguments.quick), arguments.quick)
