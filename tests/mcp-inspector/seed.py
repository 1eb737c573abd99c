"""A small history for the MCP Inspector test and the conformance run
(tests/mcp-conformance): ``python seed.py DB WORKSPACE``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from chat_history.model import Key, Message
from chat_history.service import history
from chat_history.service.manager import ChatHistoryManager

now = int(time.time() * 1000)
manager = ChatHistoryManager.open(Path(sys.argv[1]))
try:
    history.append(
        manager,
        Key(sys.argv[2], "retry"),
        [
            Message(role="user", content="How should the retry logic back off?", timestamp=now),
            Message(
                role="assistant",
                content="We decided on exponential backoff with jitter.",
                timestamp=now + 1,
            ),
        ],
    )
finally:
    manager.close()
