"""The largest input per limit, each sent to a fresh real server (``python -m chat_history``):
the time until it is answered and the server's peak memory (VmHWM); then whole-history reads
(``get`` without ``limit``, ``format``) of stored histories, each by a fresh server. The
figures of README's "Cost of the largest inputs" tables come from ``python bench/limits.py``.
Not part of ``make bench`` (it takes a few minutes and ~1 GB)."""

from __future__ import annotations

import base64
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from chat_history.client import StdioClient  # noqa: E402
from chat_history.wire.checks import (  # noqa: E402
    MAX_ATTACHMENT_CHARS,
    MAX_CONTENT_CHARS,
    MAX_JSON_FIELD_CHARS,
    MAX_MESSAGES,
)
from chat_history.wire.transport.scan import MAX_CONTAINERS  # noqa: E402

KEEP_ALL = {"maxMessages": 100_000, "maxTokens": 0, "maxAgeHours": 0, "maxToolResultChars": 0}


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def body(request_id: int, method: str, params: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def peak_mb(client: StdioClient) -> float:
    status = Path(f"/proc/{client.process.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def append(messages: list[dict[str, Any]]) -> bytes:
    return frame(body(1_000, "chatHistory/append", {"conversationId": "c", "messages": messages}))


def case_content() -> bytes:
    return append([user("x" * MAX_CONTENT_CHARS)])


def case_emoji() -> bytes:
    return append([user("😀" * MAX_CONTENT_CHARS)])


def case_image() -> bytes:
    data = base64.b64encode(bytes(MAX_ATTACHMENT_CHARS // 4 * 3)).decode()
    image = {"kind": "image", "mimeType": "image/png", "data": data}
    return append([user("look", attachments=[image])])


def case_metadata() -> bytes:
    return append([user("m", metadata={"k": "x" * (MAX_JSON_FIELD_CHARS - 10)})])


def case_frame_cap() -> bytes:
    return append([user("z" * 268_000) for _ in range(MAX_MESSAGES)])


def case_objects() -> bytes:
    # 999,000 empty objects in 3 metadata fields of ~1,000,000 characters: with the messages,
    # lists and params, just under MAX_CONTAINERS.
    return append([user("o", metadata={"m": [{}] * 333_000}) for _ in range(3)])


def case_objects_over() -> bytes:
    return append([user("o", metadata={"m": [{}] * (MAX_CONTAINERS + 1)})])


def case_messages() -> bytes:
    return append([user("y" * 100_000) for _ in range(MAX_MESSAGES)])


def case_unclosed_markers() -> bytes:
    text = "[IMAGE:" * (MAX_CONTENT_CHARS // 7)
    return append([user(text)]) + frame(
        body(1_001, "chatHistory/prepare", {"conversationId": "c", "provider": "anthropic"})
    )


def case_junk() -> bytes:
    return b"x\n" * 500_000 + frame(body(1_000, "chatHistory/getSummary", {"conversationId": "c"}))


def case_digits() -> bytes:
    return b"Content-Length: " + b"9" * 8_000 + b"\r\n\r\n" + b"{}"


CASES: dict[str, tuple[Callable[[], bytes], int]] = {
    "content: 4,000,000 ASCII characters": (case_content, 1_000),
    "content: 4,000,000 emoji (16 MB of UTF-8)": (case_emoji, 1_000),
    "image: 20,000,000 base64 characters": (case_image, 1_000),
    "metadata: 1,000,000 characters of JSON": (case_metadata, 1_000),
    "1,000 messages of 100,000 characters (100 MB)": (case_messages, 1_000),
    "1,000 messages of 268,000 characters (the 256 MiB frame cap)": (case_frame_cap, 1_000),
    "999,000 empty objects in metadata (about the most accepted)": (case_objects, 1_000),
    f"{MAX_CONTAINERS + 1:,} objects (refused)": (case_objects_over, 1_000),
    "unclosed [IMAGE: at the content limit, append + prepare": (case_unclosed_markers, 1_001),
    "500,000 junk lines, then a request": (case_junk, 1_000),
    "Content-Length of 8,000 digits": (case_digits, -1),
}


def run(name: str, make: Callable[[], bytes], answer_id: int) -> None:
    payload = make()
    with tempfile.TemporaryDirectory() as folder:
        client = StdioClient(Path(folder))
        try:
            client.initialize(KEEP_ALL, workspace="w")
            before = peak_mb(client)
            start = time.perf_counter()
            client.send_bytes(payload)
            answer = client.receive() if answer_id < 0 else client.response(answer_id)
            seconds = time.perf_counter() - start
            outcome = (
                "error {}".format(answer["error"]["code"]) if "error" in answer else "stored/served"
            )
            print(
                f"| {name} | {len(payload) / 1e6:,.1f} MB | {seconds:,.2f} s | "
                f"{peak_mb(client):,.0f} MB (idle {before:,.0f}) | {outcome} |",
                flush=True,
            )
        finally:
            client.close()


#: Stored histories read whole by a fresh server: (rows, characters a row, character).
READS: dict[str, tuple[int, int, str]] = {
    "50 rows of 2,000,000 characters": (50, 2_000_000, "r"),
    "20,000 rows of 5,000 characters": (20_000, 5_000, "s"),
    "100,000 rows of 1,000 characters": (100_000, 1_000, "t"),
    "100,000 rows of 100 characters": (100_000, 100, "u"),
    "50 rows of 500,000 emoji (2 MB of UTF-8 each)": (50, 500_000, "😀"),
}
#: The requests that read a whole history: (method, extra params).
READ_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "get without limit": ("chatHistory/get", {}),
    "format (openai)": ("chatHistory/format", {"provider": "openai"}),
}


def store_history(folder: Path, rows: int, chars: int, char: str) -> int:
    """The history, appended by a server that then exits; its stored content in bytes."""
    text = char * chars
    batch = max(1, min(MAX_MESSAGES, 50_000_000 // len(text.encode())))
    with StdioClient(folder) as client:
        client.initialize(KEEP_ALL, workspace="w")
        for start in range(0, rows, batch):
            count = min(batch, rows - start)
            client.send_bytes(append([user(text) for _ in range(count)]))
            answer = client.response(1_000)
            assert "result" in answer, answer
    return rows * len(text.encode())


def run_read(name: str, shape: tuple[int, int, str]) -> None:
    """Each whole-history read, sent to a fresh server on the stored history: the peak's growth
    over the idle server, per byte of stored content."""
    with tempfile.TemporaryDirectory() as folder:
        stored = store_history(Path(folder), *shape)
        for label, (method, extra) in READ_METHODS.items():
            client = StdioClient(Path(folder))
            try:
                client.initialize(KEEP_ALL, workspace="w")
                before = peak_mb(client)
                start = time.perf_counter()
                client.send_bytes(frame(body(1_000, method, {"conversationId": "c", **extra})))
                answer = client.response(1_000)
                seconds = time.perf_counter() - start
                peak = peak_mb(client)
                size = len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode())
                outcome = (
                    "error {}".format(answer["error"]["code"]) if "error" in answer else "served"
                )
                print(
                    f"| {label}: {name} | {stored / 1e6:,.0f} MB | {size / 1e6:,.0f} MB | "
                    f"{seconds:,.2f} s | {peak:,.0f} MB | "
                    f"{(peak - before) * 1024 * 1024 / stored:.1f}x | {outcome} |",
                    flush=True,
                )
            finally:
                client.close()


def main() -> None:
    wanted = sys.argv[1:]
    print("| input | request | answered after | server peak memory | outcome |")
    print("|---|---|---|---|---|")
    for name, (make, answer_id) in CASES.items():
        if not wanted or any(w in name for w in wanted):
            run(name, make, answer_id)
    reads = [(n, shape) for n, shape in READS.items() if not wanted or any(w in n for w in wanted)]
    if reads:
        print()
        print(
            "| read | stored content | answer | answered after | server peak | growth ÷ stored |"
            " outcome |"
        )
        print("|---|---|---|---|---|---|---|")
    for name, shape in reads:
        run_read(name, shape)


if __name__ == "__main__":
    main()
