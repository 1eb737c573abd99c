"""``python -m chat_history`` / ``chat-history-server``: the JSON-RPC server on stdio;
``--check``: the launch check (launch_check.py); ``--help``, ``--version``; any other argument
is an error with the usage (exit 2). Loads on any Python >= 3.8 far enough to say that an older
one is too old."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any


class _QuietExpectedErrors(logging.Filter):
    """pygls logs every error response with a traceback; expected domain errors are not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            from pygls.exceptions import JsonRpcException

            from chat_history.wire.protocol import EXPECTED_CODES

            error = record.exc_info[1]
            if isinstance(error, JsonRpcException) and error.code in EXPECTED_CODES:
                return False
        return True


def parser() -> argparse.ArgumentParser:
    """The server's command line: no argument serves on stdio."""
    from chat_history import __version__

    made = argparse.ArgumentParser(
        prog="chat-history-server",
        description=(
            "Chat history for editor chat panels: a JSON-RPC server (LSP base framing) on "
            "stdin/stdout. Started by an editor; with no argument it serves until `exit`. "
            "The command-line tool for people is `chat-history`."
        ),
    )
    made.add_argument(
        "--check",
        action="store_true",
        help="check that this Python can run the server, print the result and exit",
    )
    made.add_argument(
        "--stdio",
        action="store_true",
        help="serve on stdin/stdout (the default; accepted for LSP clients that pass it)",
    )
    made.add_argument("--version", action="version", version=f"chat-history-server {__version__}")
    return made


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """``chat-history-server``: log to stderr and serve the protocol on stdio until ``exit``;
    ``--check``: the launch check (launch_check.py)."""
    from chat_history import launch_check

    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.check:
        sys.exit(launch_check.run())
    problem = launch_check.too_old()
    if problem is not None:
        sys.exit(f"chat-history-server: {problem}")
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_QuietExpectedErrors())
    logging.basicConfig(
        level=logging.WARNING,
        handlers=[handler],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from chat_history.wire.server import server

    # A signal it can catch ends the server as its client's closing pipe does: its streaming
    # replies are interrupted at once (protocol.md "Replies in flight").
    for name in ("SIGTERM", "SIGHUP"):  # SIGHUP: not on Windows
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _interrupted)
    try:
        server.start_io()
    finally:
        if server.manager is not None:
            server.manager.store.close()  # a pending WAL reset gets its last try
    sys.exit(server.exit_code)


if __name__ == "__main__":
    main()
