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
from workload import CONVERSATION, OTHER_CONVERSATIONS, OTHER_LENGTH, Msg, split, take


def measure(
    call: Callable[[], object],
    reps: int,
    budget_s: float,
    warmup: int = 2,
    between: Callable[[], None] | None = None,
) -> list[float]:
    """Milliseconds per call: ``reps`` samples after ``warmup`` untimed calls, fewer (at least 3)
    when the op's time budget runs out first. ``between`` runs after each sample, untimed."""
    for _ in range(warmup):
        call()
    samples: list[float] = []
    started = time.perf_counter()
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
        if between is not None:
            between()
        if len(samples) >= 3 and time.perf_counter() - started > budget_s:
            break
    return samples


def kind(message: Msg) -> str:
    """user, assistant, call (an assistant row carrying a tool call) or tool."""
    if message.role == "assistant" and message.call_id:
        return "call"
    return message.role


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
            # Over stdio, a trivial request follows each timed call (untimed for the op), so an
            # op and the trivial request it is compared with see the same drift of the machine.
            trivial: dict[str, list[float]] = {}
            stdio = system if isinstance(system, OursStdio) else None

            def paired(op: str) -> Callable[[], None] | None:
                if stdio is None:
                    return None
                samples = trivial.setdefault(op, [])
                return lambda: samples.extend(measure(stdio.trivial, 1, budget_s, warmup=0))

            # Generated before the clock starts: making a message's text is not the system's cost.
            planned = [next(rest) for _ in range(reps["append"] + 2)]
            upcoming = iter(planned)
            ops["append"] = measure(
                lambda: system.append(next(upcoming)),
                reps["append"],
                budget_s,
                between=paired("append"),
            )
            # Which kind of row each timed append wrote (after the 2 warm-up calls).
            kinds = [kind(m) for m in planned[2 : 2 + len(ops["append"])]]
            returned: dict[str, int] = {}
            ops["get"] = measure(
                lambda: returned.__setitem__("get", system.get()),
                reps["get"],
                budget_s,
                between=paired("get"),
            )
            ops["prepare"] = measure(
                lambda: returned.__setitem__("prepare", system.prepare()),
                reps["prepare"],
                budget_s,
                between=paired("prepare"),
            )
            result: dict[str, Any] = {
                "preload_s": preload_s,
                "ops": ops,
                "returned": returned,
                "append_kinds": kinds,
            }
            if stdio is not None:
                ops["trivial"] = [ms for samples in trivial.values() for ms in samples]
                result["trivial_by_op"] = trivial
                result["rss_kib"] = stdio.rss_kib()
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
