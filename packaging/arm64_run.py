"""`make e2e-install`'s run of the linux-arm64 .vsix (issue 44 item 3): its bundled libraries
started by Debian's own arm64 Python under qemu-user and asked over the real protocols.

    python packaging/arm64_run.py --vsix dist/chat-panel-linux-arm64.vsix --cache DIR

- qemu-user-static comes from apt on first use (as root, else with sudo);
- Debian's arm64 Python (``python3.X-minimal``, ``libpython3.X-stdlib`` and what they depend on)
  is downloaded with apt under a private configuration (``APT::Architecture "arm64"``, its own
  lists, cache and an empty dpkg status, the host's sources) and unpacked with ``dpkg-deb -x``
  into ``DIR/debian-arm64-python/sysroot``: the host's dpkg, its architectures and its Python are
  never touched, and later runs reuse the folder without the network;
- the .vsix is unpacked and ``bundled/boot.py`` run as the panel runs it
  (``python -I -S bundled/boot.py``), through ``qemu-aarch64-static -L SYSROOT``:
  the launch check; the server over LSP framing (initialize, append, get, prepare for every
  provider kind, search; each answer equal to the same session on this host's own server); ``cli
  mcp`` (tools/list, a search of what the server stored); ``cli acp`` in front of the SDK-built
  test agent (tests/e2e/acp_peers/agent.py, run natively by this Python); ``cli --database``
  loading the payload's psycopg and libpq.

Any wrong answer ends it with a message saying which, and exit 1."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: How long one answer may take under emulation (a cold start compiles every module it imports).
ANSWER_TIMEOUT = 180.0
WORKSPACE = "file:///arm64/run"
CONVERSATION = "arm64"
#: The messages' times, given: the answers that carry them are then the same in both sessions.
NOW = int(time.time() // 3600 * 3600 * 1000)
MESSAGES = [
    {"role": "system", "content": "You are terse.", "timestamp": NOW},
    {
        "role": "user",
        "content": "Why is the build red on aarch64? Die Überprüfung schlug fehl. 構建失敗 🔴",
        "timestamp": NOW + 1000,
    },
    {
        "role": "assistant",
        "content": "",
        "toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "ci.log"}}],
        "timestamp": NOW + 2000,
    },
    {
        "role": "tool",
        "toolCallId": "call_1",
        "name": "read_file",
        "content": "lint failed at line 12",
        "timestamp": NOW + 3000,
    },
    {"role": "assistant", "content": "The lint step fails on line 12.", "timestamp": NOW + 4000},
]
#: Each provider kind and the body fields it must answer with (docs: protocol.md, ProviderRequest).
BODIES = {
    "openai": {"messages"},
    "openai-responses": {"instructions", "input"},
    "anthropic": {"system", "messages"},
    "gemini": {"systemInstruction", "contents"},
    "ollama": {"messages"},
    "mistral": {"messages"},
    "bedrock": {"system", "messages"},
    "cohere": {"messages"},
}
MCP_TOOLS = ["search_history", "list_conversations", "read_conversation"]


class Wrong(Exception):
    """A wrong answer: what was asked, what came."""


def expect(condition: object, what: str) -> None:
    if not condition:
        raise Wrong(what)


def log(text: str) -> None:
    print(f"arm64-run: {text}", flush=True)


# -- what runs it --------------------------------------------------------------------------------


def sudo() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo"]


def ensure_qemu() -> str:
    """qemu-aarch64-static, installed with apt when missing. Explicit, never binfmt_misc (a
    container may have none): the payload's Python is started through it by path."""
    found = shutil.which("qemu-aarch64-static")
    if found:
        return found
    log("apt-get install qemu-user-static")
    subprocess.run([*sudo(), "apt-get", "update", "-qq"], check=True)
    subprocess.run(
        [*sudo(), "apt-get", "install", "-y", "-qq", "--no-install-recommends", "qemu-user-static"],
        check=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    found = shutil.which("qemu-aarch64-static")
    if not found:
        raise SystemExit("arm64-run: qemu-user-static installed no qemu-aarch64-static")
    return found


def apt_config(folder: Path) -> Path:
    """A private apt configuration for Debian's arm64 packages: its own lists, cache and (empty)
    dpkg status under ``folder``, the host's sources (and proxy settings: apt.conf.d is still
    read). It only downloads: the host's dpkg database and architectures are left alone."""
    for part in ("state/lists/partial", "cache/archives/partial"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    (folder / "state" / "status").touch()
    config = folder / "apt.conf"
    settings = {
        "APT::Architecture": "arm64",
        "Dir::State": folder / "state",
        "Dir::State::status": folder / "state" / "status",
        "Dir::Cache": folder / "cache",
        "Dir::Etc::SourceList": "/etc/apt/sources.list",
        "Dir::Etc::SourceParts": "/etc/apt/sources.list.d",
        "APT::Install-Recommends": "false",
        # as root apt downloads as _apt, which cannot write into a folder of ours
        "APT::Sandbox::User": "root" if os.geteuid() == 0 else "",
    }
    lines = [f'{key} "{value}";' for key, value in settings.items() if value != ""]
    lines.append('APT::Architectures { "arm64"; };')
    config.write_text("\n".join(lines) + "\n")
    return config


def ensure_python(cache: Path) -> tuple[Path, Path]:
    """(sysroot, its python3.X): Debian's arm64 Python of the release the host's sources name,
    unpacked once into ``cache``; reused when present."""
    folder = cache / "debian-arm64-python"
    sysroot = folder / "sysroot"
    done = folder / "installed.json"
    if done.is_file():
        minor = json.loads(done.read_text())["python"]
        return sysroot, sysroot / "usr" / "bin" / f"python{minor}"
    apt = folder / "apt"
    config = apt_config(apt)
    env = {**os.environ, "APT_CONFIG": str(config), "DEBIAN_FRONTEND": "noninteractive"}
    log(f"downloading Debian's arm64 Python into {folder} (apt, its own lists and cache)")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    # Which minor this Debian ships: what its python3-minimal depends on.
    shown = subprocess.run(
        ["apt-cache", "show", "--no-all-versions", "python3-minimal"],
        check=True, capture_output=True, text=True, env=env,
    ).stdout  # fmt: skip
    found = re.search(r"^(?:Pre-)?Depends:.*?\bpython(3\.\d+)-minimal\b", shown, re.MULTILINE)
    if found is None:
        raise SystemExit(f"arm64-run: no python3.X-minimal in Debian's python3-minimal:\n{shown}")
    minor = found.group(1)
    packages = [f"python{minor}-minimal", f"libpython{minor}-stdlib"]
    download = ["apt-get", "install", "-qq", "-y", "--download-only", *packages]
    subprocess.run(download, check=True, env=env)
    debs = sorted((apt / "cache" / "archives").glob("*.deb"))
    staging = folder / "sysroot.partial"
    shutil.rmtree(staging, ignore_errors=True)
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(staging)], check=True)
    shutil.rmtree(sysroot, ignore_errors=True)
    staging.rename(sysroot)
    shutil.rmtree(apt)  # lists and packages: the sysroot is what is kept
    done.write_text(json.dumps({"python": minor, "debs": [d.name for d in debs]}, indent=1))
    log(f"Debian's arm64 Python {minor}: {len(debs)} packages unpacked")
    return sysroot, sysroot / "usr" / "bin" / f"python{minor}"


# -- the two wire formats ------------------------------------------------------------------------


class Peer:
    """One process spoken to over its stdio: LSP base framing (``framed``) or one JSON message a
    line (MCP, ACP). Its notifications are kept; a request of its own is answered null (nothing
    asked here needs more: no capability is declared that would bring one)."""

    def __init__(
        self,
        command: list[str],
        *,
        framed: bool,
        env: dict[str, str],
        cwd: Path | None = None,
    ) -> None:
        self.framed = framed
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        self.stderr = b""
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                if self.framed:
                    length = None
                    while (line := stdout.readline()) not in (b"\r\n", b""):
                        name, _, value = line.decode("ascii").partition(":")
                        if name.strip().lower() == "content-length":
                            length = int(value)
                    if length is None:
                        break
                    self.inbox.put(json.loads(stdout.read(length)))
                else:
                    line = stdout.readline()
                    if not line:
                        break
                    self.inbox.put(json.loads(line))
        finally:
            self.inbox.put(None)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := os.read(self.process.stderr.fileno(), 65536):
            self.stderr += chunk

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        body = json.dumps(message).encode()
        if self.framed:
            self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        else:
            self.process.stdin.write(body + b"\n")
        self.process.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def call(self, method: str, params: Any) -> Any:
        """The result; Wrong on an error answer, an exit or no answer in time."""
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while True:
            try:
                message = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise Wrong(f"{method}: no answer in {ANSWER_TIMEOUT:.0f} s{self.tail()}") from None
            if message is None:
                raise Wrong(f"{method}: the process closed its stdout{self.tail()}")
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append(message)
            elif message.get("id") == self._next:
                if "error" in message:
                    raise Wrong(f"{method}: error {message['error']}{self.tail()}")
                return message.get("result")

    def tail(self) -> str:
        text = self.stderr.decode(errors="replace").strip()
        return f"\n--- its stderr:\n{text[-4000:]}" if text else ""

    def close(self) -> int:
        """Close its stdin (the editor leaves): it must end on its own; its exit code."""
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            return self.process.wait(ANSWER_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise Wrong(f"it did not exit when its stdin closed{self.tail()}") from None


@contextlib.contextmanager
def peer(command: list[str], **options: Any) -> Iterator[Peer]:
    running = Peer(command, **options)
    try:
        yield running
    finally:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait()


# -- what is asked -------------------------------------------------------------------------------


def launch_check(boot: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [*boot, "--check"], capture_output=True, text=True, env=env, timeout=ANSWER_TIMEOUT
    )
    expect(done.returncode == 0, f"--check exited {done.returncode}: {done.stdout}{done.stderr}")
    answer: dict[str, Any] = json.loads(done.stdout)
    expect(answer.get("ok") is True and answer.get("problem") is None, f"--check: {answer}")
    return answer


def server_session(boot: list[str], storage: Path, env: dict[str, str]) -> list[Any]:
    """The answers of one session of the server: initialize, append, get, prepare for every
    provider kind, search; shutdown and exit 0. Checked here for what they must say; the caller
    compares the whole answers with this host's."""
    answers: list[Any] = []
    with peer(boot, framed=True, env=env) as server:
        init = server.call(
            "initialize",
            {
                "processId": None,
                "capabilities": {},
                "initializationOptions": {"storagePath": str(storage), "workspace": WORKSPACE},
            },
        )
        server.notify("initialized", {})
        providers = init["capabilities"]["experimental"]["chatHistory"]["providers"]
        expect(sorted(providers) == sorted(BODIES), f"initialize: providers {providers}")
        answers.append(init)

        key = {"conversationId": CONVERSATION}
        appended = server.call("chatHistory/append", {**key, "messages": MESSAGES})
        rows = appended["messages"]
        expect(
            [r["role"] for r in rows] == [m["role"] for m in MESSAGES]
            and [r["content"] for r in rows] == [m["content"] for m in MESSAGES]
            and all(r["tokens"] > 0 for r in rows),
            f"append: {rows}",
        )
        answers.append(appended)

        got = server.call("chatHistory/get", {**key, "limit": 50})
        expect(got["messages"] == rows and got["hasMore"] is False, f"get: {got}")
        answers.append(got)

        key_of: set[str] = set()
        for kind, fields in BODIES.items():
            prepared = server.call("chatHistory/prepare", {**key, "provider": kind, "model": "m"})
            body = json.dumps(prepared.get("body"), ensure_ascii=False)
            expect(
                prepared["provider"] == kind
                and set(prepared["body"]) == fields
                and MESSAGES[1]["content"] in body
                and "lint failed at line 12" in body
                and prepared["estimatedTokens"] > 0,
                f"prepare {kind}: {prepared}",
            )
            # salted per database (not reversible): the same within one, compared as such
            key_of.add(prepared.pop("cacheKey"))
            answers.append(prepared)
        expect(len(key_of) == 1 and "" not in key_of, f"prepare: cacheKey {key_of}")

        # Accent- and case-insensitive, in the index APSW (compiled for aarch64) keeps.
        found = server.call("chatHistory/search", {"query": "uberprufung"})
        hits = found["results"]
        expect(
            [(h["conversationId"], h["role"]) for h in hits] == [(CONVERSATION, "user")]
            and [hits[0]["snippet"][a:b] for a, b in hits[0]["highlights"]] == ["Überprüfung"],
            f"search: {found}",
        )
        answers.append(found)
        answers.append(mapped_modules(server.process.pid))

        expect(server.call("shutdown", None) is None, "shutdown")
        server.notify("exit", None)
        code = server.process.wait(ANSWER_TIMEOUT)
        expect(code == 0, f"the server exited {code} after exit{server.tail()}")
    return answers


def mapped_modules(pid: int) -> list[str]:
    """The compiled Python modules the process has mapped (the names carry Python and machine):
    qemu-user maps the guest's files into its own process, so the host's /proc shows them."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in maps if re.search(r"\.cpython-[^/]*\.so$", line)})


def mcp_session(cli: list[str], storage: Path, env: dict[str, str]) -> list[Any]:
    """``cli mcp`` over the server's database: initialize, tools/list, a search_history call."""
    with peer(
        [*cli, "--db", str(storage), "mcp", "--workspace", WORKSPACE], framed=False, env=env
    ) as mcp:
        init = mcp.call(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "arm64-run", "version": "1"},
            },
        )
        expect(init["serverInfo"]["name"] == "chat-history", f"mcp initialize: {init}")
        mcp.notify("notifications/initialized", {})
        tools = mcp.call("tools/list", {})
        names = [tool["name"] for tool in tools["tools"]]
        expect(names == MCP_TOOLS, f"mcp tools/list: {names}")
        called = mcp.call("tools/call", {"name": "search_history", "arguments": {"query": "lint"}})
        text = json.dumps(called, ensure_ascii=False)
        expect(
            not called.get("isError") and "line 12" in text and CONVERSATION in text,
            f"mcp search_history: {called}",
        )
        code = mcp.close()
        expect(code == 0, f"cli mcp exited {code}{mcp.tail()}")
    return [init["serverInfo"]["name"], tools, called]


def acp_session(cli: list[str], storage: Path, env: dict[str, str], cwd: Path) -> None:
    """``cli acp`` in front of the SDK-built test agent (this host's Python runs the agent):
    initialize (the proxy adds the session capabilities the agent lacks), a new session, a
    prompt streamed back, and the session listed from the store the arm64 proxy wrote."""
    agent = [sys.executable, "-m", "tests.e2e.acp_peers.agent"]
    command = [*cli, "--db", str(storage), "acp", "--", *agent]
    with peer(command, framed=False, env=env, cwd=ROOT) as acp:
        init = acp.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        caps = init["agentCapabilities"]
        sessions = caps.get("sessionCapabilities", {})
        expect(
            init["protocolVersion"] == 1
            and caps.get("loadSession") is True
            and all(k in sessions for k in ("list", "resume", "close", "delete")),
            f"acp initialize: {init}",
        )
        session = acp.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
        prompt = [{"type": "text", "text": "hello from aarch64"}]
        answer = acp.call("session/prompt", {"sessionId": session, "prompt": prompt})
        expect(answer.get("stopReason") == "end_turn", f"acp session/prompt: {answer}")
        updates = [
            n["params"]["update"] for n in acp.notifications if n["method"] == "session/update"
        ]
        said = "".join(
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
        )
        kinds = {u["sessionUpdate"] for u in updates}
        expect(
            said == "Let me look at that.Done: hello from aarch64"
            and {"agent_thought_chunk", "tool_call", "tool_call_update"} <= kinds,
            f"acp updates: {updates}",
        )
        listed = acp.call("session/list", {"cwd": str(cwd)})["sessions"]
        expect(
            [(s["sessionId"], s.get("title")) for s in listed] == [(session, prompt[0]["text"])],
            f"acp session/list (served from the store): {listed}",
        )
        code = acp.close()
        expect(code == 0, f"cli acp exited {code}{acp.tail()}")


def postgres_driver(cli: list[str], env: dict[str, str], nowhere: Path) -> None:
    """The payload's psycopg and libpq (aarch64) load: pointed at a socket that does not exist,
    the answer is libpq's own connection error (vsix.py's smoke_postgres, which only the host's
    target gets)."""
    url = f"postgresql://nobody@/nothing?host={nowhere}"
    done = subprocess.run(
        [*cli, "--database", url, "workspaces"],
        capture_output=True, text=True, env=env, timeout=ANSWER_TIMEOUT,
    )  # fmt: skip
    expect(
        done.returncode == 3 and "connection to server on socket" in done.stderr,
        f"cli --database: exit {done.returncode}, expected 3 and libpq's error:\n{done.stderr}",
    )


# -- the run -------------------------------------------------------------------------------------


def timed(name: str, work: Callable[[], Any]) -> Any:
    started = time.monotonic()
    try:
        result = work()
    except Wrong as wrong:
        raise Wrong(f"{name}: {wrong}") from None
    except (KeyError, TypeError, ValueError, IndexError) as error:  # an answer of the wrong shape
        raise Wrong(f"{name}: {type(error).__name__}: {error}") from error
    log(f"ok - {name} ({time.monotonic() - started:.1f} s)")
    return result


def run(vsix: Path, cache: Path) -> None:
    started = time.monotonic()
    qemu = ensure_qemu()
    sysroot, python = ensure_python(cache)
    minor = python.name.removeprefix("python")
    with tempfile.TemporaryDirectory(prefix="arm64-run-") as folder:
        work = Path(folder).resolve()  # as /proc names the files mapped
        with zipfile.ZipFile(vsix) as archive:
            archive.extractall(work / "vsix")
        bundled = work / "vsix" / "extension" / "bundled"
        tag = f"cpython-{minor.replace('.', '')}-aarch64-linux-gnu.so"
        compiled = sorted(p.name for p in (bundled / "libs" / "apsw").glob(f"*{tag}"))
        expect(compiled, f"the .vsix has no compiled APSW for Debian's Python {minor} ({tag})")
        boot = [qemu, "-L", str(sysroot), str(python), "-I", "-S", str(bundled / "boot.py")]
        cli = [*boot, "cli"]
        # The extension host's environment, no more: no Python of this host on PATH.
        env = {"PATH": os.defpath, "HOME": str(work / "home"), "LANG": "C.UTF-8"}
        host = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}"}
        (work / "home").mkdir()
        for name in ("arm64", "host", "acp", "nowhere", "cwd"):
            (work / name).mkdir()
        reference = [sys.executable]  # this host's Python, the server from the repository
        log(f"{vsix.name} with Debian's arm64 Python {minor} under {qemu}")

        def lane_server() -> None:
            theirs = timed(
                "the server: initialize, append, get, prepare x8, search",
                lambda: server_session(boot, work / "arm64", env),
            )
            ours = timed(
                "the same on this host's own server",
                lambda: server_session([*reference, "-m", "chat_history"], work / "host", host),
            )
            mapped = [p for p in theirs[-1] if p.startswith(f"{bundled}/libs/")]
            expect(
                any(p.startswith(f"{bundled}/libs/apsw/") for p in mapped)
                and all(p.endswith(tag) for p in mapped),
                f"the compiled modules it mapped are not the payload's for aarch64: {mapped}",
            )
            for mine, other in zip(theirs[:-1], ours[:-1], strict=True):
                expect(mine == other, f"an answer differs from this host's:\n{mine}\n{other}")
            log("ok - every answer equals this host's own server's")
            theirs_mcp = timed(
                "cli mcp: tools/list, search_history", lambda: mcp_session(cli, work / "arm64", env)
            )
            ours_mcp = timed(
                "the same on this host's own cli mcp",
                lambda: mcp_session([*reference, "-m", "chat_history.cli"], work / "host", host),
            )
            expect(
                theirs_mcp == ours_mcp,
                f"cli mcp differs from this host's:\n{theirs_mcp}\n{ours_mcp}",
            )

        def lane_rest() -> None:
            answer = timed("--check", lambda: launch_check(boot, env))
            expect(answer["python"].startswith(f"{minor}."), f"--check: {answer}")
            timed(
                "cli acp in front of the SDK test agent",
                lambda: acp_session(cli, work / "acp", env, work / "cwd"),
            )
            timed(
                "cli --database: psycopg and libpq load",
                lambda: postgres_driver(cli, env, work / "nowhere"),
            )

        with ThreadPoolExecutor(max_workers=2) as pool:
            for lane in [pool.submit(lane_server), pool.submit(lane_rest)]:
                lane.result()
    log(f"linux-arm64 ran ({time.monotonic() - started:.0f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vsix", type=Path, default=ROOT / "dist" / "chat-panel-linux-arm64.vsix")
    parser.add_argument(
        "--cache", type=Path, default=ROOT / "examples" / "chat-panel" / ".e2e-cache"
    )
    options = parser.parse_args()
    try:
        run(options.vsix.resolve(), options.cache.resolve())
    except Wrong as wrong:
        print(f"arm64-run: WRONG: {wrong}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
