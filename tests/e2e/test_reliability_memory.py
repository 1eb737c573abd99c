"""Memory and storage bounded by what is asked, over the real server process (issue 22, items
8, 10 and 11): a listing of conversations with large metadata holds their text, not ~24× that
in parsed objects; paging conversations of large images does not keep them resident once
answered; calibration keys are bounded in length and number. Memory is the server process's
own figure from /proc (VmHWM: its peak; VmRSS: now)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from tests.e2e import reliability
from tests.e2e.reliability import (
    KEEP_ALL,
    Server,
    database_bytes,
    database_path,
    deadline,
    frame,
    request_body,
    start,
    user,
)

from chat_history.store.calibration import MAX_KEYS

MIB = 1024 * 1024

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc"),
    pytest.mark.engines,
    pytest.mark.usefixtures("server_databases"),
]


def memory(server: Server, field: str) -> int:
    """The server's VmHWM or VmRSS, in bytes."""
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def read_frame(server: Server) -> bytes:
    """The next frame's body, unparsed (a parsed answer of a million ``{}`` costs the test
    what it measures in the server)."""
    stdout = server.process.stdout
    assert stdout is not None
    length = -1
    while (line := stdout.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return stdout.read(length)


def test_a_listing_of_large_metadata_holds_about_its_answer(tmp_path: Path) -> None:
    # 30 conversations whose metadata is 1 MB of `{}` (the largest accepted: 1,000,000
    # characters), written as raw bytes so the test never holds the objects either.
    metadata = b'{"m":[' + b",".join([b"{}"] * 333_000) + b"]}"
    server = start(tmp_path / "store", KEEP_ALL)
    try:
        for n in range(30):
            params = b'{"conversationId":"c%d","metadata":%s}' % (n, metadata)
            body = (
                b'{"jsonrpc":"2.0","id":%d,"method":"chatHistory/updateConversation","params":%s}'
                % (1_000 + n, params)
            )
            server.send_bytes(frame(body))
            with deadline(server, 60, "updateConversation not answered"):
                assert b'"error"' not in read_frame(server)[:200]
        peak_before = memory(server, "VmHWM")
        server.send_bytes(
            frame(request_body(2_000, "chatHistory/listConversations", {"limit": 30}))
        )
        with deadline(server, 60, "listConversations not answered"):
            answer = read_frame(server)
        growth = memory(server, "VmHWM") - peak_before
        assert answer.count(metadata) == 30
        # The text, its bytes on the way out, and slack; parsed, it was ~700 MiB.
        assert growth <= 3 * len(answer) + 16 * MIB, (growth // MIB, len(answer) // MIB)
        assert json.loads(answer[-200:].split(b'"nextCursor":')[1].rstrip(b"}")) is None
    finally:
        server.close()


def image_rows(count: int, size: int) -> list[dict[str, object]]:
    data = base64.b64encode(os.urandom(size * 3 // 4)).decode()
    return [
        user(f"look {n}", attachments=[{"kind": "image", "mimeType": "image/png", "data": data}])
        for n in range(count)
    ]


def test_paging_conversations_of_large_images_leaves_nothing_resident(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    writer = start(storage, KEEP_ALL)
    try:
        for c in range(3):
            for row in image_rows(10, 8 * 1024 * 1024):  # 10 rows of 8 MB images each
                writer.append(f"c{c}", row, timeout=60)
    finally:
        writer.close()
    server = start(storage, KEEP_ALL)
    try:
        at_start = memory(server, "VmRSS")
        for c in range(3):
            before = None
            while True:
                params: dict[str, object] = {"conversationId": f"c{c}", "limit": 4}
                if before is not None:
                    params["beforeId"] = before
                page = server.ok("chatHistory/get", params, timeout=60)
                before = page["messages"][0]["id"]
                del page["messages"]
                if not page["hasMore"]:
                    break
        time.sleep(1.5)  # at rest
        resident = memory(server, "VmRSS") - at_start
        # 240 MB of images were read and answered. The remembered rows are bounded in bytes of
        # everything they hold (images included), and the heaps are trimmed after large
        # answers: 176 MiB stay (248 without the trim); when only content characters counted,
        # 392 MiB did.
        assert resident <= 200 * MIB, resident // MIB
    finally:
        server.close()


def database_size(folder: Path) -> int:
    """The bytes the database takes: SQLite's files, or PostgreSQL's relations of calibration."""
    if reliability.DATABASES is None:
        return sum(len(blob) for blob in database_bytes(folder).values())
    (size,) = query(folder, "SELECT pg_total_relation_size('calibration_samples')")
    return int(size)


def query(folder: Path, sql: str) -> tuple[Any, ...]:
    """One row of ``sql`` on the database of ``folder`` (either engine)."""
    if reliability.DATABASES is None:
        with contextlib.closing(sqlite3.connect(database_path(folder))) as db:
            return tuple(db.execute(sql).fetchone())
    import psycopg

    with psycopg.connect(reliability.DATABASES.url(folder)) as db:
        row = db.execute(sql).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return tuple(row)


def test_calibration_keys_are_bounded_in_length_and_number(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    server = start(storage, KEEP_ALL)
    try:
        usage = {"estimatedTokens": 100, "promptTokens": 120}
        server.ok("chatHistory/reportUsage", {"model": "warm-up", **usage})
        size_before = database_size(storage)
        huge = "m" * 1_000_000
        for n in range(100):  # 100 distinct 1 MB model names (they added 192 MiB before)
            answer = server.ok("chatHistory/reportUsage", {"model": f"{n}{huge}", **usage})
            assert answer["samples"] == 1
        again = server.ok("chatHistory/reportUsage", {"model": f"7{huge}", **usage})
        assert again["samples"] == 2  # distinct long names stay distinct keys
        assert database_size(storage) - size_before < 2 * MIB
        for n in range(MAX_KEYS + 20):
            server.ok("chatHistory/reportUsage", {"model": f"model-{n}", **usage})
        (keys,) = query(
            storage,
            "SELECT COUNT(*) FROM (SELECT 1 FROM calibration_samples GROUP BY kind, model) AS k",
        )
        longest = query(storage, "SELECT MAX(LENGTH(model)) FROM calibration_samples")
        assert keys == MAX_KEYS
        assert longest[0] < 300
        # the keys reported longest ago were forgotten; the newest kept
        assert server.ok("chatHistory/reportUsage", {"model": "model-0", **usage})["samples"] == 1
        newest = {"model": f"model-{MAX_KEYS + 19}", **usage}
        assert server.ok("chatHistory/reportUsage", newest)["samples"] == 2
    finally:
        server.close()
