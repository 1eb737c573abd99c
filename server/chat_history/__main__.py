"""``python -m chat_history`` / ``chat-history-server``: the JSON-RPC server on stdio."""

from __future__ import annotations

import logging
import sys


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


def main() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_QuietExpectedErrors())
    logging.basicConfig(
        level=logging.WARNING,
        handlers=[handler],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from chat_history.wire.server import server

    try:
        server.start_io()
    finally:
        if server.manager is not None:
            server.manager.store.close()  # a pending WAL reset gets its last try
    sys.exit(server.exit_code)


if __name__ == "__main__":
    main()
