"""``python -m chat_history`` / ``chat-history-server``: the JSON-RPC server on stdio;
``--check``: the launch check (launch_check.py). Loads on any Python >= 3.8 far enough to say
that an older one is too old."""

from __future__ import annotations

import logging
import signal
import sys
from typing import Any


class _QuietExpectedErrors(logging.Filter):
    """pygls logs every error response with a traceback; expected domain errors are not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            from pygls.exceptions import JsonRpcException

            from chat_history.wire.server import EXPECTED_CODES

            error = record.exc_info[1]
            if isinstance(error, JsonRpcException) and error.code in EXPECTED_CODES:
                return False
        return True


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """``chat-history-server``: log to stderr and serve the protocol on stdio until ``exit``;
    ``--check``: the launch check (launch_check.py)."""
    from chat_history import launch_check

    if sys.argv[1:] == ["--check"]:
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
