"""Start time of a server command: spawn → ``initialize`` answered, best and median of N, each on
fresh storage. ``python packaging/start_time.py N -- COMMAND ARGS...`` (the figures in the
issue 26 notes)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time


def frame(body: dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def once(command: list[str]) -> float:
    with tempfile.TemporaryDirectory() as storage:
        started = time.perf_counter()
        child = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert child.stdin is not None and child.stdout is not None
        params = {"processId": None, "rootUri": None, "capabilities": {}}
        params["initializationOptions"] = {"storagePath": storage}
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        child.stdin.write(frame(request))
        child.stdin.flush()
        answer: dict[str, object] = {}
        while answer.get("id") != 1:  # log notifications may come first
            length = 0
            while line := child.stdout.readline().strip():
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            answer = json.loads(child.stdout.read(length))
        elapsed = time.perf_counter() - started
        assert answer.get("id") == 1 and "result" in answer, answer
        child.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        child.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        child.stdin.close()
        child.wait(timeout=20)
        return elapsed


def main() -> int:
    runs = int(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    times = [once(command) for _ in range(runs)]
    print(f"best {min(times):.2f} s, median {statistics.median(times):.2f} s ({runs} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
