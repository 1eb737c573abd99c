"""One system at one size in its own process (so a time cap can stop it, and imports and memory
do not leak between systems): preload, then time each operation; prints one JSON object."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from systems import SYSTEMS, OursStdio
from workload import CONVERSATION, OTHER_CONVERSATIONS, OTHER_LENGTH, split, take


def measure(call: Callable[[], object], reps: int, budget_s: float, warmup: int = 2) -> list[float]:
    """Milliseconds per call: ``reps`` samples after ``warmup`` untimed calls, fewer (at least 3)
    when the op's time budget runs out first."""
    for _ in range(warmup):
        call()
    samples: list[float] = []
    started = time.perf_counter()
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
        if len(samples) >= 3 and time.perf_counter() - started > budget_s:
            break
    return samples


def run(system_name: str, size: int, reps: dict[str, int], budget_s: float) -> dict[str, Any]:
    others = {f"other{i}": take(OTHER_LENGTH, f"o{i}") for i in range(OTHER_CONVERSATIONS)}
    target, rest = split(size, CONVERSATION)
    with tempfile.TemporaryDirectory(prefix="chat-bench-") as tmp:
        system = SYSTEMS[system_name](Path(tmp))
        t0 = time.perf_counter()
        system.preload(target, others)
        preload_s = time.perf_counter() - t0
        try:
            ops: dict[str, list[float]] = {}
            # Generated before the clock starts: making a message's text is not the system's cost.
            upcoming = iter([next(rest) for _ in range(reps["append"] + 2)])
            ops["append"] = measure(lambda: system.append(next(upcoming)), reps["append"], budget_s)
            returned: dict[str, int] = {}
            ops["get"] = measure(
                lambda: returned.__setitem__("get", system.get()), reps["get"], budget_s
            )
            ops["prepare"] = measure(
                lambda: returned.__setitem__("prepare", system.prepare()), reps["prepare"], budget_s
            )
            result: dict[str, Any] = {"preload_s": preload_s, "ops": ops, "returned": returned}
            if isinstance(system, OursStdio):
                ops["trivial"] = measure(system.trivial, reps["get"], budget_s)
                result["rss_kib"] = system.rss_kib()
        finally:
            system.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=sorted(SYSTEMS))
    parser.add_argument("size", type=int)
    parser.add_argument("--reps", default='{"append": 200, "get": 100, "prepare": 50}')
    parser.add_argument("--op-budget", type=float, default=6.0)
    args = parser.parse_args()
    result = run(args.system, args.size, json.loads(args.reps), args.op_budget)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
