"""Issue 18 item 12 over the real process: a large answer (an unlimited ``get``, a ``format``
of the whole history) is written in chunks, and what the client receives is byte for byte what
one ``json.dumps`` of the answer gave: compact UTF-8 JSON with a
Content-Length equal to the body's length in bytes. Peak memory is measured in bench/limits.py
(README's "Cost of the largest inputs"); the one bound asserted here is wide."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.reliability import (
    KEEP_ALL,
    Server,
    assistant,
    deadline,
    frame,
    request_body,
    start,
    user,
)

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("server_databases")]

#: A hang guard, not a timing assertion.
SLOW_ANSWER = 120.0


def canonical(message: Any) -> bytes:
    """The old encoding of a message: one compact json.dumps, non-ASCII as is, a lone
    surrogate as its escape. The decoded answer re-encoded this way must be the body itself."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


def read_raw(server: Server) -> tuple[int, bytes]:
    """The next frame as (Content-Length, body bytes)."""
    stdout = server.process.stdout
    assert stdout is not None
    length = -1
    while (line := stdout.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return length, stdout.read(length)


def raw_answer(server: Server, request_id: int, method: str, params: Any) -> tuple[int, bytes]:
    server.send_bytes(frame(request_body(request_id, method, params)))
    with deadline(server, SLOW_ANSWER, f"{method} was not answered"):
        return read_raw(server)


def history() -> list[list[dict[str, Any]]]:
    """Appends of every kind of row, ~6 MB in all: long non-ASCII text with characters JSON
    escapes, tool calls and their results, images, provider data and metadata with non-ASCII
    keys, and many small rows. (Lone surrogates are refused on input; the unit tests cover
    their escape.)"""
    image = base64.b64encode(os.urandom(300_000)).decode()
    batches: list[list[dict[str, Any]]] = []
    for n in range(12):
        text = f"turn {n} " + '😀é中\u2028"\\\n' * (20_000 + 3_001 * n)
        batches.append(
            [
                user(
                    text,
                    metadata={"ключ": {"n": n, "f": 0.1 * n, "ok": True, "none": None}},
                    **(
                        {"attachments": [{"kind": "image", "mimeType": "image/png", "data": image}]}
                        if n % 5 == 0
                        else {}
                    ),
                ),
                assistant(
                    f"calling {n}",
                    toolCalls=[{"id": f"c{n}", "name": "read", "arguments": {"path": f"é/{n}"}}],
                    providerData={"anthropic": {"thinking": [{"signature": "s" * 100}]}},
                ),
                {"role": "tool", "toolCallId": f"c{n}", "content": "结果 " * 5_000},
                assistant(f"answer {n} " + "ü" * 50_000),
            ]
        )
    batches.append([user(f"small {n} 😀") for n in range(1_000)])
    return batches


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A server holding ``history()`` in conversation "big", and the messages sent."""
    root = tmp_path_factory.mktemp("answers")
    process = start(root / "store", KEEP_ALL, log=root / "server.log")
    sent: list[dict[str, Any]] = []
    for batch in history():
        process.append("big", *batch)
        sent += batch
    yield process, sent
    process.close()


def test_an_unlimited_get_is_the_old_bytes_with_a_content_length_in_bytes(
    big: tuple[Server, list[dict[str, Any]]],
) -> None:
    server, sent = big
    length, body = raw_answer(server, 7_001, "chatHistory/get", {"conversationId": "big"})
    assert length == len(body) > 5_000_000
    answer = json.loads(body.decode("utf-8"))  # strict UTF-8
    assert body == canonical(answer)
    rows = answer["result"]["messages"]
    assert [r["content"] for r in rows] == [m["content"] for m in sent]
    assert "😀é中".encode() in body and b"\\ud83d" not in body
    assert rows[0]["metadata"] == sent[0]["metadata"]
    assert rows[0]["attachments"][0]["data"] == sent[0]["attachments"][0]["data"]
    assert rows[1]["toolCalls"][0]["arguments"] == {"path": "é/0"}
    # The same rows as pages: the unlimited answer leaves nothing out.
    paged: list[dict[str, Any]] = []
    before: dict[str, Any] = {}
    while True:
        page = server.ok("chatHistory/get", {"conversationId": "big", "limit": 500, **before})
        paged = page["messages"] + paged
        if not page["hasMore"]:
            break
        before = {"beforeId": page["messages"][0]["id"]}
    assert paged == rows


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_format_of_the_whole_history_is_the_old_bytes(
    big: tuple[Server, list[dict[str, Any]]], provider: str
) -> None:
    server = big[0]
    length, body = raw_answer(
        server, 7_002, "chatHistory/format", {"conversationId": "big", "provider": provider}
    )
    assert length == len(body) > 5_000_000
    answer = json.loads(body.decode("utf-8"))
    assert answer["id"] == 7_002 and answer["result"]["provider"] == provider
    assert body == canonical(answer)


def memory_kb(server: Server, field: str) -> int:
    """``VmHWM`` (the peak) or ``VmRSS`` (now) of the server process."""
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith(field + ":")).split()[1])


def test_an_unlimited_get_of_many_small_rows_peaks_well_under_the_old_cost(
    tmp_path: Path,
) -> None:
    """60,000 rows of 100 characters (17 MB of answer). The old encoding (the rows, a dict per
    row, the answer as one str and as bytes) grew the peak by 6.9x the answer's bytes; now by
    3.3x (the rows and the chunks). Asserted: under 5x, a bound on memory, not time, so load
    does not move it."""
    storage = tmp_path / "store"
    writer = start(storage, KEEP_ALL, log=tmp_path / "writer.log")
    try:
        for start_at in range(0, 60_000, 1_000):
            rows = (user(f"{n:07d} " + "m" * 92) for n in range(start_at, start_at + 1_000))
            writer.append("many", *rows)
    finally:
        writer.close()
    reader = start(storage, KEEP_ALL, log=tmp_path / "reader.log")
    try:
        # Warm up the code paths of a get (imports, the thread pool) on another conversation.
        reader.ok("chatHistory/get", {"conversationId": "other"})
        before = memory_kb(reader, "VmRSS")
        length, body = raw_answer(reader, 7_003, "chatHistory/get", {"conversationId": "many"})
        grown = (memory_kb(reader, "VmHWM") - before) * 1024
        assert length == len(body)
        assert len(json.loads(body)["result"]["messages"]) == 60_000
        assert grown < 5 * len(body), (grown, len(body))
    finally:
        reader.close()
