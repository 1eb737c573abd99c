"""``make bench``, start-up part (issue 45): spawn → the first answers, for every way the server is
started, each beside a bare Python and a bare pygls server started the same way in the same run.

- **the server** (the installed ``chat-history-server``): spawn → ``initialize`` answered, then
  ``initialized`` and the first ``chatHistory/listConversations`` answered;
- **the frozen server** inside the linux-x64 ``.vsix`` under dist/ (``packaging/vsix.py`` builds
  it; skipped with a note when none is there);
- ``chat-history mcp``: spawn → ``initialize``, then the first ``tools/list`` answered;
- ``chat-history acp``: spawn → the agent's ``initialize`` answer relayed (the raw test agent,
  tests/e2e/acp_peers/raw_agent.py), beside the same agent started directly;
- the floors: a bare Python (bench/echo_server.py: answers every request with null) and a bare
  pygls server (bench/bare_server.py), sent the same two requests.

Warm page cache: rounds alternate every command (load that comes and goes lands on all). Cold:
the page cache is dropped before each start (``echo 3 > /proc/sys/vm/drop_caches``, as root;
otherwise the run says it could not). ``--against ROOT`` measures another checkout's server,
MCP and ACP commands in the same rounds (``PYTHONPATH=ROOT/server``), for before/after figures.
Medians in ms; writes the "First answers after spawn" section of BENCHMARKS.md."""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from roundtrip import replace_section  # noqa: E402

BIN = Path(sys.executable).parent
AGENT = [sys.executable, "-m", "tests.e2e.acp_peers.raw_agent"]
SETTINGS = {"maxMessages": 1000}
HEADING = "## First answers after spawn"


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Child:
    """A process spoken to in LSP frames (``lines``: newline-delimited JSON, as MCP and ACP)."""

    def __init__(self, argv: list[str], env: dict[str, str], lines: bool) -> None:
        self.lines = lines
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, **env},
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        message = {"jsonrpc": "2.0", **message}
        data = (json.dumps(message) + "\n").encode() if self.lines else frame(message)
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def answer(self, msg_id: int) -> dict[str, Any]:
        """Read until the answer to ``msg_id`` (notifications and requests before it skipped)."""
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            if self.lines:
                line = stdout.readline()
                if not line:
                    raise RuntimeError("the process closed its output")
                if not line.strip().startswith(b"{"):
                    continue
                message: dict[str, Any] = json.loads(line)
            else:
                length = 0
                while line := stdout.readline():
                    if not line.strip():
                        break
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if not line:
                    raise RuntimeError("the process closed its output")
                message = json.loads(stdout.read(length))
            if message.get("id") == msg_id and "method" not in message:
                return message

    def close(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def lsp_start(argv: list[str], env: dict[str, str], first: str) -> tuple[float, float]:
    """ms from spawn to ``initialize`` answered, and to the first request ``first`` answered."""
    with tempfile.TemporaryDirectory(prefix="chat-history-start-") as storage:
        started = time.perf_counter()
        child = Child(argv, env, lines=False)
        try:
            params = {
                "processId": None,
                "rootUri": "file:///bench/start",
                "capabilities": {},
                "initializationOptions": {"storagePath": storage, "settings": SETTINGS},
            }
            child.send({"id": 1, "method": "initialize", "params": params})
            child.answer(1)
            initialized = time.perf_counter()
            child.send({"method": "initialized", "params": {}})
            child.send({"id": 2, "method": first, "params": {}})
            child.answer(2)
            answered = time.perf_counter()
            child.send({"id": 3, "method": "shutdown"})
            child.answer(3)
            child.send({"method": "exit"})
        finally:
            child.close()
    return (initialized - started) * 1000, (answered - started) * 1000


def mcp_start(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """ms from spawn to MCP ``initialize`` answered, and to the first ``tools/list`` answered."""
    # The storage folder, not a file in it: `mcp` creates no database a --db file names
    # (cli/agents.py check_store), only the one of a storage folder that exists.
    with tempfile.TemporaryDirectory(prefix="chat-history-start-") as folder:
        started = time.perf_counter()
        child = Child([*argv[:-1], "--db", folder, argv[-1]], env, True)
        try:
            params = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            }
            child.send({"id": 1, "method": "initialize", "params": params})
            child.answer(1)
            initialized = time.perf_counter()
            child.send({"method": "notifications/initialized"})
            child.send({"id": 2, "method": "tools/list", "params": {}})
            child.answer(2)
            answered = time.perf_counter()
        finally:
            child.close()
    return (initialized - started) * 1000, (answered - started) * 1000


def acp_start(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """ms from spawn to ACP ``initialize`` answered (relayed from the agent), twice the same:
    the proxy's first answer is the agent's."""
    with tempfile.TemporaryDirectory(prefix="chat-history-start-") as folder:
        command = [a.replace("{db}", str(Path(folder) / "h.sqlite3")) for a in argv]
        started = time.perf_counter()
        child = Child(command, {"ACP_RAW_MODE": "stream", **env}, lines=True)
        try:
            child.send(
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1, "clientCapabilities": {}},
                }
            )
            child.answer(1)
            answered = (time.perf_counter() - started) * 1000
        finally:
            child.close()
    return answered, answered


Start = Callable[[], tuple[float, float]]


def targets(against: Path | None) -> tuple[dict[str, Start], list[str]]:
    """The commands measured, by name, and notes on what was skipped."""
    notes: list[str] = []
    server = [str(BIN / "chat-history-server")]
    cli = [sys.executable, "-m", "chat_history.cli"]
    found: dict[str, Start] = {
        "bare Python": lambda: lsp_start(
            [sys.executable, str(BENCH / "echo_server.py")], {}, "echo"
        ),
        "bare pygls": lambda: lsp_start(
            [sys.executable, str(BENCH / "bare_server.py")], {}, "bench/echo"
        ),
        "server": lambda: lsp_start(server, {}, "chatHistory/listConversations"),
        "chat-history mcp": lambda: mcp_start([*cli, "mcp"], {}),
        "ACP agent alone": lambda: acp_start(AGENT, {"PYTHONPATH": str(ROOT)}),
        "chat-history acp": lambda: acp_start(
            [*cli, "--db", "{db}", "acp", "--", *AGENT], {"PYTHONPATH": str(ROOT)}
        ),
    }
    if against is not None:
        old = {"PYTHONPATH": f"{against / 'server'}"}
        found["server (against)"] = lambda: lsp_start(server, old, "chatHistory/listConversations")
        found["chat-history mcp (against)"] = lambda: mcp_start([*cli, "mcp"], old)
        acp_env = {"PYTHONPATH": f"{against / 'server'}:{ROOT}"}
        found["chat-history acp (against)"] = lambda: acp_start(
            [*cli, "--db", "{db}", "acp", "--", *AGENT], acp_env
        )
    frozen = frozen_server()
    if frozen is None:
        notes.append(
            "The frozen server: no linux-x64 .vsix under dist/ (`make vsix`, slow, builds it): "
            "skipped."
        )
    else:
        found["frozen server (.vsix)"] = lambda: lsp_start(
            [str(frozen)], {}, "chatHistory/listConversations"
        )
    return found, notes


def frozen_server() -> Path | None:
    """The frozen server of dist/'s linux-x64 .vsix, unpacked once (None: no such .vsix)."""
    vsix = next(iter(sorted((ROOT / "dist").glob("*linux-x64*.vsix"))), None)
    if vsix is None:
        return None
    folder = Path(tempfile.gettempdir()) / f"chat-history-start-{vsix.stat().st_mtime_ns}"
    binary = folder / "extension" / "server" / "chat-history-server"
    if not binary.exists():
        with zipfile.ZipFile(vsix) as archive:
            for info in archive.infolist():  # keep the execute bits zipfile drops
                archive.extract(info, folder)
                mode = info.external_attr >> 16
                if mode:
                    (folder / info.filename).chmod(mode & 0o777)
    return binary if binary.exists() else None


def drop_caches() -> bool:
    """Drop the page cache (root only); whether it could."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


Samples = dict[str, list[tuple[float, float]]]


def measure(found: dict[str, Start], rounds: int, cold: bool) -> Samples:
    samples: Samples = {name: [] for name in found}
    if not cold:
        for start in found.values():  # the page cache warmed for every command
            start()
    for _ in range(rounds):
        for name, start in found.items():
            if cold and not drop_caches():
                raise PermissionError("cannot drop the page cache (not root)")
            samples[name].append(start())
    return samples


def table(results: dict[str, Samples]) -> list[str]:
    lines = [
        "| command | cache | first answer (`initialize`) ms | first request ms (min-max) |",
        "|---|---|---:|---:|",
    ]
    for cache, samples in results.items():
        for name, values in samples.items():
            first = statistics.median(v[0] for v in values)
            second = [v[1] for v in values]
            shown = name.replace(" (against)", " (main)")
            lines.append(
                f"| {shown} | {cache} | {first:.0f} | {statistics.median(second):.0f} "
                f"({min(second):.0f}-{max(second):.0f}) |"
            )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="warm rounds")
    parser.add_argument("--cold", type=int, default=3, help="cold rounds (0: none)")
    parser.add_argument("--against", type=Path, help="another checkout's root, alongside")
    parser.add_argument("--only", help="comma-separated names to measure (printed only)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    # Bytecode as an installed wheel has it (an editable checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every module on every start).
    for root in [ROOT, *([args.against] if args.against else [])]:
        compileall.compile_dir(root / "server" / "chat_history", quiet=1)
    found, notes = targets(args.against)
    if args.only:
        wanted = args.only.split(",")
        found = {name: start for name, start in found.items() if name in wanted}
        args.no_write = True
    results: dict[str, Samples] = {}
    loads = [os.getloadavg()[0]]
    results["warm"] = measure(found, args.rounds, cold=False)
    loads.append(os.getloadavg()[0])
    if args.cold:
        if drop_caches():
            results["cold"] = measure(found, args.cold, cold=True)
            loads.append(os.getloadavg()[0])
        else:
            notes.append("Cold page cache: could not drop it (not root): not measured.")
    lines = table(results)
    load = f"{min(loads):.1f}-{max(loads):.1f}"
    print("\n".join([*lines, "", f"load average {load}", *notes]))
    if args.no_write:
        return
    section = [
        HEADING,
        "",
        "`bench/startup.py`: spawn → `initialize` answered, then the first request answered "
        "(`chatHistory/listConversations`; MCP: `tools/list`; ACP: the agent's `initialize` "
        "relayed), medians of "
        f"{args.rounds} warm rounds and {args.cold} cold ones (page cache dropped before each "
        "start), every command in each round. The bare floors answer the same two requests; "
        "the `(main)` rows are another checkout's commands (`--against`, main before the change "
        "measured) in the same rounds. "
        f"Load average {load} on 2 CPUs, shared. Goal: the server's first "
        "`listConversations` answered ≤ 200 ms after spawn.",
        "",
        *lines,
        "",
        *notes,
        *STARTUP_NOTES,
    ]
    replace_section(ROOT / "BENCHMARKS.md", HEADING, "\n".join(section).rstrip("\n") + "\n")


#: What the start-up is made of and what was cut (issue 45), from ``python -X importtime`` and
#: CPU time of the imports (``time.process_time()``, medians of 6-8 interleaved runs at load
#: 10-15: CPU time moves far less with load than wall time): a recorded run, written with the table.
STARTUP_NOTES: list[str] = [
    "",
    "What a start costs, in CPU ms of the imports (a recorded run, load 10-15; a quiet "
    "machine's wall time is about these figures): Python itself 10; before issue 45 the "
    "server imported 590-610 before it could read its first message, pygls and lsprotocol "
    "430-480 of it (`lsprotocol.types` ~90 %). Now:",
    "",
    "- **The front** (wire/server.py and what it imports: the session, the manager, the store, "
    "the settings, attrs and cattrs) ~155, then the first custom request's own family of "
    "methods (wire/methods `FAMILIES`: the first `listConversations` loads only "
    "`conversations`, ~6, where the whole table was ~27-40), `initialize`'s own work ~7 and a "
    "first `listConversations` ~6. About a third of the front's imports is attrs generating "
    "its classes' methods (`compile` alone: 50 ms for 164 calls, `-X importtime` with a "
    "counting `compile`).",
    "- **Not before the first answers**: pygls and lsprotocol (wire/lsp.py, loaded on a "
    "thread once a custom request was answered, 0.3 s after the start, or when a message "
    "needs it), asyncio (~20 % of the front's imports before: the event loop starts with "
    "pygls or when the settings pull or the end of input needs it), argparse (the editor's "
    "start has no arguments), ctypes (at the first trim), `ctypes.util`'s shutil and lzma "
    "(malloc_trim is found in the process's own symbols), the PostgreSQL engine (its package "
    "loads `PostgresStore` at the first use: the store imports only `url.py`, to check the "
    "`database` option; psycopg is not loaded), the importers (~7 % of the imports before: "
    "they load at the first `importFrom`, wire/methods/imports.py).",
    "- **Left**: `fractions` (policy/calibration.py), `secrets`/`hmac` (store/keys.py), "
    "`uuid` (service/replies.py); attrs itself loads `inspect`. The frozen server inside the "
    "linux-x64 `.vsix` (PyInstaller) answers within 1.2× of the installed one, warm and cold: "
    "its bootloader and archive cost ~40-60 ms before Python runs the same code.",
    "- **`chat-history mcp` and `acp`**, CPU ms of what each imports before its first answer "
    "(fresh Pythons, medians of 9 interleaved runs, load 3-4) against main: the CLI's parser "
    "names every subcommand (cli/main.py `COMMANDS`) and imports only the family of the one it "
    "parses, so neither imports the importers, the export format, rendering or the wire's "
    "tables any more (`chat-history --help` 27 against 212); the ACP SDK's `acp.schema` loads "
    "at the first history the proxy replays from the store (acp/served.py), not at its start. "
    "`acp` 215 against 763: its first answer, the agent's relayed, a third of main's above. "
    "`mcp` 755 against 808: its first answers are the MCP SDK's, whose `mcp.server.lowlevel` "
    "and `mcp_types` are now ~85 % of what it imports; left beside them, the manager and the "
    "store that every command opens (cli/common.py) and argparse. The server 179 against 211 "
    "(the PostgreSQL engine).",
]


if __name__ == "__main__":
    main()
