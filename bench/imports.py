"""``make bench``, imports part: ``chat-history import --from claude-code`` of a Claude Code
project folder of 100 MB (100 sessions of 1 MB: prompts, replies with tool calls, tool results)
into a new SQLite file, beside the baseline of the same run: ``chat-history import`` of the
export of what it imported (our own format, the same messages). Wall time and peak memory (the
child's maximum resident set) of each, and the peak of a folder a quarter the size: memory is
bounded by the largest session, not the folder. Writes the "Imports" section of BENCHMARKS.md.
``--quick``: a 10 MB folder."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION_BYTES = 1_000_000
PROJECT = "/bench/shop"


def session_lines(n: int) -> list[str]:
    """One Claude Code session of about SESSION_BYTES: turns of a prompt, a reply calling a tool,
    its result and a closing reply."""
    sid = f"00000000-0000-4000-8000-{n:012d}"
    lines: list[str] = []
    size, turn = 0, 0
    base = {"cwd": PROJECT, "sessionId": sid, "version": "2.1.0", "isSidechain": False}
    while size < SESSION_BYTES:
        stamp = f"2026-11-{1 + turn % 28:02d}T10:{turn % 60:02d}:00.000Z"
        call = f"toolu_{n}_{turn}"
        records = [
            {"type": "user", "uuid": f"u{turn}", "timestamp": stamp,
             "message": {"role": "user", "content": f"Turn {turn}: why does test {turn} fail?"}},
            {"type": "assistant", "uuid": f"a{turn}", "timestamp": stamp,
             "message": {"id": f"msg_{n}_{turn}", "role": "assistant", "model": "claude-sonnet-4-5",
                         "content": [{"type": "text", "text": "Reading the test file first."},
                                     {"type": "tool_use", "id": call, "name": "Read",
                                      "input": {"file_path": f"{PROJECT}/t{turn}.spec.ts"}}]}},
            {"type": "user", "uuid": f"r{turn}", "timestamp": stamp,
             "message": {"role": "user", "content": [
                 {"type": "tool_result", "tool_use_id": call,
                  "content": f"// test {turn}\n" + "expect(total(items)).toBe(42);\n" * 40}]}},
            {"type": "assistant", "uuid": f"b{turn}", "timestamp": stamp,
             "message": {"id": f"msg_{n}_{turn}_b", "role": "assistant",
                         "content": [{"type": "text", "text": f"Test {turn} compares floats."}]}},
        ]  # fmt: skip
        for record in records:
            line = json.dumps({**base, **record})
            lines.append(line)
            size += len(line) + 1
        turn += 1
    return lines


def make_folder(folder: Path, megabytes: int) -> int:
    """A project folder of ``megabytes`` sessions; the lines written."""
    folder.mkdir(parents=True)
    written = 0
    for n in range(megabytes):
        lines = session_lines(n)
        (folder / f"00000000-0000-4000-8000-{n:012d}.jsonl").write_text("\n".join(lines) + "\n")
        written += len(lines)
    return written


def measure(base: Path, megabytes: int) -> dict[str, float]:
    folder = base / "projects" / "-bench-shop"
    make_folder(folder, megabytes)
    db, again = base / "from.sqlite3", base / "own.sqlite3"
    seconds, peak, out = run_peak("--db", str(db), "import", "--from", "claude-code", str(folder))
    export = base / "export.jsonl"
    with export.open("w") as sink:
        subprocess.run(
            [sys.executable, "-m", "chat_history.cli", "--db", str(db), "export"],
            stdout=sink,
            check=True,
        )
    own_seconds, own_peak, _ = run_peak("--db", str(again), "import", str(export))
    messages = int(out.rsplit("Imported ", 1)[1].split(" ", 1)[0].replace(",", ""))
    return {
        "seconds": seconds,
        "peak": peak,
        "own_seconds": own_seconds,
        "own_peak": own_peak,
        "messages": messages,
    }


def run_peak(*args: str) -> tuple[float, int, str]:
    """(seconds, peak resident MiB, stdout) of one ``chat-history`` command: the peak is that
    child's own (``wait4``), not the largest of every child so far."""
    command = [sys.executable, "-m", "chat_history.cli", *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.monotonic()
        child = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.monotonic() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed: {err.read()[-2000:]}")
        return elapsed, usage.ru_maxrss // 1024, out.read()


def report(big: int, small: int, full: dict[str, float], quarter: dict[str, float]) -> str:
    return "\n".join(
        [
            "## Imports",
            "",
            f"`bench/imports.py`: `chat-history import --from claude-code` of a Claude Code "
            f"project folder of {big} MB ({big} sessions of 1 MB, {full['messages']:,.0f} "
            "messages) into a new SQLite file, beside `chat-history import` of the export of "
            "what it imported (our own format, the same messages), in the same run. Peak: the "
            "child process's maximum resident set. A folder a quarter the size shows that memory "
            "follows the largest session, not the folder.",
            "",
            "| import | folder | seconds | ratio to our own format | peak MiB |",
            "|---|---|---|---|---|",
            f"| `--from claude-code` | {big} MB | {full['seconds']:.1f} | "
            f"{full['seconds'] / full['own_seconds']:.2f}× | {full['peak']:.0f} |",
            f"| our own JSONL (baseline) | same messages | {full['own_seconds']:.1f} | 1.00× | "
            f"{full['own_peak']:.0f} |",
            f"| `--from claude-code` | {small} MB | {quarter['seconds']:.1f} | "
            f"{quarter['seconds'] / quarter['own_seconds']:.2f}× | {quarter['peak']:.0f} |",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 10 MB folder")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args()
    big = 10 if args.quick else 100
    small = big // 4
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
        full = measure(Path(first), big)
        quarter = measure(Path(second), small)
    text = report(big, small, full, quarter)
    print(text)
    if args.out.exists():
        current = args.out.read_text()
        head, found, rest = current.partition("\n## Imports\n")
        tail = rest[rest.find("\n## ") :] if found and "\n## " in rest else ""
        args.out.write_text(head.rstrip("\n") + "\n\n" + text + tail)


if __name__ == "__main__":
    main()
