"""A misbehaving ACP agent written by hand (newline-delimited JSON-RPC on stdio), for the
proxy's fault tests. ``ACP_RAW_MODE``:

- ``garbage``: a line that is not JSON, and one that is a JSON array, before every answer;
- ``huge``: each prompt streams one ``agent_message_chunk`` of ``ACP_RAW_HUGE`` bytes (one line);
- ``reorder``: holds each prompt until a second one arrives, then answers the later one first;
- ``forgetful``: declares ``loadSession`` but knows no session to load (-32002);
- ``badnew``: answers every ``session/new`` after the first without a session id;
- ``stream`` (bench/acp.py): each prompt streams ``ACP_RAW_UPDATES`` chunks at
  ``ACP_RAW_RATE`` a second, each text the sending time (``time.monotonic``, shared by the
  machine's processes); any other request is answered ``{}`` at once."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

MODE = os.environ.get("ACP_RAW_MODE", "")
held: list[dict[str, Any]] = []
count = 0


def send(message: dict[str, Any]) -> None:
    if MODE == "garbage":
        sys.stdout.write("this is not json\n[1, 2, 3]\n")
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def chunk(session: str, text: str) -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session, "update": update},
        }
    )


def stream(session: str) -> None:
    total, rate = int(os.environ["ACP_RAW_UPDATES"]), float(os.environ["ACP_RAW_RATE"])
    start = time.monotonic()
    for n in range(total):
        delay = start + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        chunk(session, repr(time.monotonic()))


def reply(request: dict[str, Any]) -> None:
    session = request["params"]["sessionId"]
    if MODE == "stream":
        stream(session)
    asked = request["params"]["prompt"][-1]["text"]
    if MODE == "huge":
        sys.stdout.write(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": session,
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {
                                "type": "text",
                                "text": "x" * int(os.environ["ACP_RAW_HUGE"]),
                            },
                        },
                    },
                }
            )
            + "\n"
        )
    chunk(session, f"answer to {asked}")
    send({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}})


for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if method == "initialize":
        caps = {"loadSession": True} if MODE == "forgetful" else {}
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"protocolVersion": 1, "agentCapabilities": caps},
            }
        )
    elif method == "session/new":
        count += 1
        if MODE == "badnew" and count > 1:
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": f"raw-{count}"}})
    elif method == "session/prompt" and MODE == "reorder":
        held.append(request)
        if len(held) == 2:
            for waiting in reversed(held):
                reply(waiting)
            held.clear()
    elif method == "session/prompt":
        reply(request)
    elif rid is not None and MODE == "stream":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
