"""``chat-history-server``'s command line over the real process: ``--help`` and ``--version``
print and exit (they used to start the server and wait on stdin), an unknown argument is an
error with the usage (exit 2, it used to be ignored), ``--stdio`` is the default spelled out."""

from __future__ import annotations

import json
import subprocess
import sys

from chat_history import __version__

SERVER = [sys.executable, "-m", "chat_history"]


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVER, *args], input=stdin.decode(), capture_output=True, text=True, timeout=60
    )


def test_help_prints_the_usage_and_exits() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: chat-history-server")
    for flag in ("--check", "--version", "--stdio"):
        assert flag in done.stdout
    assert "Content-Length" not in done.stdout  # no frame was written: the server never started


def test_version_prints_the_version_and_exits() -> None:
    done = run("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"chat-history-server {__version__}"


def test_an_unknown_argument_is_an_error_with_the_usage() -> None:
    done = run("--verbose", "extra")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("usage: chat-history-server")
    assert "unrecognized arguments: --verbose extra" in done.stderr


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_stdio_serves_as_no_argument_does(tmp_path: object) -> None:
    """An LSP client that passes ``--stdio`` gets the server: initialize is answered."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"capabilities": {}, "initializationOptions": {"storagePath": str(tmp_path)}},
    }
    stdin = frame(request) + frame({"jsonrpc": "2.0", "method": "exit"})
    done = subprocess.run([*SERVER, "--stdio"], input=stdin, capture_output=True, timeout=60)
    assert b'"id": 1' in done.stdout or b'"id":1' in done.stdout
    assert b"chatHistory" in done.stdout


def test_check_still_runs_the_launch_check() -> None:
    done = run("--check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_a_signal_ends_the_server_while_its_client_keeps_the_pipe_open(tmp_path: object) -> None:
    """SIGTERM ends the server at once, before initialize as after it, though its stdin stays
    open: the exit no longer joins the stdin reader blocked in its read (a signalled server used
    to wait for the client to close the pipe, which a client that only kills never does)."""
    import os
    import signal
    import time

    env = {**os.environ, "CHAT_HISTORY_STORAGE": str(tmp_path)}
    for initialized in (False, True):
        server = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert server.stdin is not None and server.stdout is not None
        if initialized:
            request = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"capabilities": {}},
            }
            server.stdin.write(frame(request))
            server.stdin.flush()
            server.stdout.read1(1)  # the answer has begun: initialized
        else:
            time.sleep(1)
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        finally:
            server.kill()
            server.stdin.close()
        assert server.returncode is not None
