"""``make bench``: every system side by side in one run, on this machine, with the same workload;
rewrites BENCHMARKS.md and bench/latency.png. ``--quick`` (sizes 100 and 1,000, fewer reps) is
for iterating. Each system runs at each size in its own process under a time cap."""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from report import _targets, write_plot, write_report  # noqa: E402

ORDER = ["raw", "ours", "stdio", "agents", "langchain", "llamaindex"]
FULL = {
    "sizes": [100, 1_000, 10_000, 100_000],
    "reps": {"append": 200, "get": 100, "prepare": 100},
    "op_budget_s": 5.0,
    "cap_s": 150.0,
    "starts": 15,
}
QUICK = {
    "sizes": [100, 1_000],
    "reps": {"append": 40, "get": 20, "prepare": 10},
    "op_budget_s": 1.5,
    "cap_s": 60.0,
    "starts": 5,
}


def _estimate(previous: dict[str, Any], factor: float, config: dict[str, Any]) -> float:
    """Seconds the next size would take, scaling the previous size's preload and reads
    linearly (at least 5 calls each of get and prepare) plus the append budget."""
    reads = sum(5 * statistics.median(previous["ops"][op]) / 1000 for op in ("get", "prepare"))
    return (previous["preload_s"] + reads) * factor + config["op_budget_s"]


def run_one(system: str, size: int, config: dict[str, Any]) -> dict[str, Any]:
    command = [
        sys.executable,
        str(BENCH / "worker.py"),
        system,
        str(size),
        "--reps",
        json.dumps(config["reps"]),
        "--op-budget",
        str(config["op_budget_s"]),
    ]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=config["cap_s"], cwd=BENCH
        )
    except subprocess.TimeoutExpired:
        return {"status": f"stopped at the {config['cap_s']:.0f} s cap"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"status": f"failed: {tail[0][:200]}"}
    result: dict[str, Any] = json.loads(done.stdout)
    result["status"] = "ok"
    result["wall_s"] = time.perf_counter() - started
    return result


def startup(command: list[str], storage: Path | None) -> float:
    """Milliseconds from process start to the ``initialize`` response."""
    from chat_history.client import StdioClient

    t0 = time.perf_counter()
    client = StdioClient(storage, command=command)
    try:
        client.initialize()
        return (time.perf_counter() - t0) * 1000
    finally:
        client.close()


def measure_startup(count: int) -> dict[str, list[float]]:
    ours = [sys.executable, "-m", "chat_history"]
    bare = [sys.executable, str(BENCH / "bare_server.py")]
    samples: dict[str, list[float]] = {"ours": [], "bare": []}
    # Bytecode as an installed wheel has it (pip compiles on install; an editable checkout run
    # with PYTHONDONTWRITEBYTECODE would compile every module on every start).
    import chat_history

    compileall.compile_dir(Path(chat_history.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory(prefix="chat-bench-start-") as tmp:
        startup(ours, Path(tmp))  # warm the page cache for both
        startup(bare, None)
        for _ in range(count):  # interleaved, so drift hits both alike
            samples["ours"].append(startup(ours, Path(tmp)))
            samples["bare"].append(startup(bare, None))
    return samples


STDIO_HEADING = "## prepare over stdio against the peers"


def write_stdio_section(run: dict[str, Any], out: Path) -> None:
    """The section of BENCHMARKS.md on ``prepare`` over stdio (the real server, the whole round
    trip) against the peers' read + trim in their own process, replaced in place (issue 45)."""
    from roundtrip import replace_section

    results = run["results"]
    lines = [
        STDIO_HEADING,
        "",
        "`bench/run.py --sizes N --systems stdio,agents,langchain --stdio-section`: medians in ms "
        "of one run, each system in its own process one after the other (bench/worker.py), "
        f"load average {os.getloadavg()[0]:.1f} on 2 CPUs, shared (the peers' reads suffer "
        "more from load than ours: a quiet machine's ratios are lower). Goal (issue 45): at "
        "10,000 rows, ≥ 50× OpenAI Agents and ≥ 500× LangChain.",
        "",
        "| size | ours over stdio | OpenAI Agents read+trim | ratio "
        "| LangChain read+trim | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]

    def med(system: str, size: int) -> float | None:
        ops = results.get(system, {}).get(str(size), {}).get("ops", {})
        return statistics.median(ops["prepare"]) if ops.get("prepare") else None

    for size in run["config"]["sizes"]:
        ours, agents, langchain = (med(name, size) for name in ("stdio", "agents", "langchain"))
        cells = [f"{ours:.3f}" if ours else "–"]
        for peer in (agents, langchain):
            cells += [f"{peer:.1f}" if peer else "–"]
            cells += [f"{peer / ours:,.0f}×" if peer and ours else "–"]
        lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    replace_section(out, STDIO_HEADING, "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="sizes 100 and 1,000, fewer reps")
    parser.add_argument("--systems", default=",".join(ORDER), help="comma-separated subset")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--plot", type=Path, default=BENCH / "latency.png")
    parser.add_argument(
        "--sizes", help="comma-separated sizes: prints the medians and the targets, writes nothing"
    )
    parser.add_argument(
        "--stdio-section",
        action="store_true",
        help="with --sizes: (re)write only the section on prepare over stdio against the peers",
    )
    args = parser.parse_args()
    config = QUICK if args.quick else FULL
    if args.sizes:
        config = {**config, "sizes": [int(n) for n in args.sizes.split(",")]}
    systems = [s for s in ORDER if s in args.systems.split(",")]
    began = time.perf_counter()

    results: dict[str, dict[str, Any]] = {s: {} for s in systems}
    for size in config["sizes"]:
        for system in systems:
            previous = [r for r in results[system].values() if r.get("status") == "ok"]
            last_size = max(
                (int(k) for k, r in results[system].items() if r in previous), default=0
            )
            if previous and last_size:
                guess = _estimate(results[system][str(last_size)], size / last_size, config)
                if guess > config["cap_s"]:
                    results[system][str(size)] = {
                        "status": f"skipped: ~{guess:.0f} s expected, past the "
                        f"{config['cap_s']:.0f} s cap"
                    }
                    print(f"{system:>11} {size:>7}: skipped (~{guess:.0f} s)", flush=True)
                    continue
            result = run_one(system, size, config)
            results[system][str(size)] = result
            if result["status"] == "ok":
                meds = {op: statistics.median(v) for op, v in result["ops"].items()}
                shown = " ".join(f"{op} {ms:.3f}" for op, ms in meds.items())
                print(
                    f"{system:>11} {size:>7}: preload {result['preload_s']:.1f}s  {shown} ms",
                    flush=True,
                )
            else:
                print(f"{system:>11} {size:>7}: {result['status']}", flush=True)

    if args.sizes:
        run = {"config": config, "results": results}
        for target, measured, verdict in _targets(run):
            print(f"{target}: {measured} ({verdict})")
        if args.stdio_section:
            write_stdio_section(run, args.out)
        return
    starts = measure_startup(config["starts"])
    ours_ms, bare_ms = (statistics.median(starts[k]) for k in ("ours", "bare"))
    print(f"startup ms: ours {ours_ms:.0f}, bare {bare_ms:.0f}", flush=True)
    run = {
        "config": config,
        "quick": args.quick,
        "results": results,
        "startup": starts,
        "elapsed_s": time.perf_counter() - began,
        "command": "make bench" if not args.quick else ".venv/bin/python bench/run.py --quick",
        "cpu_count": os.cpu_count(),
    }
    if args.json:
        args.json.write_text(json.dumps(run, indent=1))
    write_plot(run, args.plot)
    write_report(run, args.out, args.plot)
    print(f"wrote {args.out} and {args.plot} in {run['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()
