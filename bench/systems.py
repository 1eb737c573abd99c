"""The systems under test, one adapter each over the same workload: preload (the fastest
legitimate way each offers), then ``append`` one message, ``get`` a page (or the nearest read the
API offers), and ``prepare`` a 4,000-token request. Peers follow the anchors of peers.md."""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workload import (
    BUDGET,
    CONVERSATION,
    PAGE,
    WORKSPACE,
    Msg,
    tokens,
)

from chat_history.service import history
from chat_history.store import engine

CHUNK = 1_000  # messages per bulk-preload call
TOOL = "read_file"
TOOL_ARGS = {"path": "src/app.py"}

#: Our settings: retention must not cap the sizes under test; the request budget is 4,000.
OUR_SETTINGS: dict[str, Any] = {
    "maxMessages": 1_000_000,
    "maxTokens": 0,
    "maxAgeHours": 0,
    "context": {"maxContextTokens": BUDGET},
}
# BENCH_TRIM_LOW_WATER: the stable prefix on (issue 23: prepare's cost with trimLowWater < 1).
if os.environ.get("BENCH_TRIM_LOW_WATER"):
    OUR_SETTINGS["context"]["trimLowWater"] = float(os.environ["BENCH_TRIM_LOW_WATER"])


def _chunks(rows: list[Any], size: int = CHUNK) -> Iterable[list[Any]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


class System:
    """What every adapter answers; ``get`` and ``prepare`` return how many messages they read
    or kept, so a broken adapter shows up as a zero in the results."""

    name = ""
    get_note = ""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def preload(self, target: list[Msg], others: dict[str, list[Msg]]) -> None:
        raise NotImplementedError

    def append(self, message: Msg) -> None:
        raise NotImplementedError

    def get(self) -> int:
        raise NotImplementedError

    def prepare(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


# -- ours ---------------------------------------------------------------------------------------


def _our_message(message: Msg) -> Any:
    from chat_history.model import Message, ToolCall

    if message.role == "assistant" and message.call_id:
        call = ToolCall(id=message.call_id, name=TOOL, arguments=TOOL_ARGS)
        return Message(role="assistant", content=message.content, tool_calls=(call,))
    if message.role == "tool":
        return Message(
            role="tool", content=message.content, tool_call_id=message.call_id, name=TOOL
        )
    return Message(role=message.role, content=message.content)  # type: ignore[arg-type]


def our_wire_message(message: Msg) -> dict[str, Any]:
    if message.role == "assistant" and message.call_id:
        return {
            "role": "assistant",
            "content": message.content,
            "toolCalls": [{"id": message.call_id, "name": TOOL, "arguments": TOOL_ARGS}],
        }
    if message.role == "tool":
        return {
            "role": "tool",
            "content": message.content,
            "toolCallId": message.call_id,
            "name": TOOL,
        }
    return {"role": message.role, "content": message.content}


def preload_ours(folder: Path, target: list[Msg], others: dict[str, list[Msg]]) -> None:
    """Batched ``append`` calls (the API takes many messages per call): the fastest legitimate
    way, with every rule of the write path applied."""
    from chat_history.service.manager import ChatHistoryManager
    from chat_history.settings import load_settings
    from chat_history.store import Key, Store

    store = Store(folder)
    manager = ChatHistoryManager(store, load_settings(OUR_SETTINGS).settings)
    try:
        for name, rows in others.items():
            history.append(manager, Key(WORKSPACE, name), [_our_message(m) for m in rows])
        key = Key(WORKSPACE, CONVERSATION)
        for chunk in _chunks(target):
            history.append(manager, key, [_our_message(m) for m in chunk])
    finally:
        store.close()


class OursInProcess(System):
    name = "ours (in-process)"
    get_note = "page of 50 (`get` with `limit`)"

    def preload(self, target: list[Msg], others: dict[str, list[Msg]]) -> None:
        from chat_history.service.manager import ChatHistoryManager
        from chat_history.service.preparation import PrepareOptions
        from chat_history.settings import load_settings
        from chat_history.store import Key, Store

        preload_ours(self.folder, target, others)
        self.store = Store(self.folder)
        self.manager = ChatHistoryManager(self.store, load_settings(OUR_SETTINGS).settings)
        self.key = Key(WORKSPACE, CONVERSATION)
        self.options = PrepareOptions()

    def append(self, message: Msg) -> None:
        history.append(self.manager, self.key, [_our_message(message)])

    def get(self) -> int:
        return len(history.get(self.manager, self.key, limit=PAGE).messages)

    def prepare(self) -> int:
        body = history.prepare(self.manager, self.key, self.options).body
        messages = body["messages"]
        assert isinstance(messages, list)
        return len(messages)

    def close(self) -> None:
        self.store.close()


class OursStdio(System):
    """The real server process over stdio, started after the preload (a cold cache)."""

    name = "ours (stdio)"
    get_note = "page of 50 (`chatHistory/get` with `limit`)"

    def preload(self, target: list[Msg], others: dict[str, list[Msg]]) -> None:
        from chat_history.client import StdioClient

        preload_ours(self.folder, target, others)
        self.client = StdioClient(self.folder)
        self.client.initialize(OUR_SETTINGS, workspace=WORKSPACE)
        self.key = {"conversationId": CONVERSATION}

    def append(self, message: Msg) -> None:
        self.client.call(
            "chatHistory/append", {**self.key, "messages": [our_wire_message(message)]}
        )

    def get(self) -> int:
        return len(self.client.call("chatHistory/get", {**self.key, "limit": PAGE})["messages"])

    def prepare(self) -> int:
        return len(self.client.call("chatHistory/prepare", self.key)["body"]["messages"])

    def trivial(self) -> int:
        """A request that does next to nothing: the summary of a conversation that has none."""
        return 0 if self.client.call("chatHistory/getSummary", {"conversationId": "none"}) else 1

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.client.process.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def close(self) -> None:
        self.client.close()


# -- the floor ----------------------------------------------------------------------------------


class RawSqlite(System):
    """The minimum: an indexed insert that keeps per-conversation totals (what a retention check
    reads) in one write transaction, a newest-first page, and a newest-first read that stops
    once the budget is spent. No turn rules, no provider body."""

    name = "raw sqlite3"
    get_note = "page of 50"

    def preload(self, target: list[Msg], others: dict[str, list[Msg]]) -> None:
        # The engine ours runs on (APSW's SQLite, store/engine.py), so the floor differs from
        # ours only in what ours does, not in the SQLite build.
        self.db = engine.connect(self.folder / "raw.sqlite3", isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(
            "CREATE TABLE m (id INTEGER PRIMARY KEY, ws TEXT NOT NULL, conv TEXT NOT NULL, "
            "role TEXT NOT NULL, content TEXT NOT NULL, call_id TEXT, tokens INTEGER NOT NULL);"
            "CREATE INDEX m_key ON m (ws, conv, id);"
            "CREATE TABLE c (ws TEXT, conv TEXT, n INTEGER, tokens INTEGER, "
            "PRIMARY KEY (ws, conv)) WITHOUT ROWID;"
        )
        for name, rows in [*others.items(), (CONVERSATION, target)]:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO m (ws, conv, role, content, call_id, tokens) VALUES (?,?,?,?,?,?)",
                [(WORKSPACE, name, m.role, m.content, m.call_id, tokens(m.content)) for m in rows],
            )
            self.db.execute(
                "INSERT INTO c VALUES (?, ?, ?, ?)",
                (WORKSPACE, name, len(rows), sum(tokens(m.content) for m in rows)),
            )
            self.db.execute("COMMIT")

    def append(self, message: Msg) -> None:
        cost = tokens(message.content)
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            "INSERT INTO m (ws, conv, role, content, call_id, tokens) VALUES (?,?,?,?,?,?)",
            (WORKSPACE, CONVERSATION, message.role, message.content, message.call_id, cost),
        )
        self.db.execute(
            "UPDATE c SET n = n + 1, tokens = tokens + ? WHERE ws = ? AND conv = ?",
            (cost, WORKSPACE, CONVERSATION),
        )
        self.db.execute("COMMIT")

    def get(self) -> int:
        rows = self.db.execute(
            "SELECT id, role, content, call_id FROM m WHERE ws = ? AND conv = ? "
            "ORDER BY id DESC LIMIT ?",
            (WORKSPACE, CONVERSATION, PAGE),
        ).fetchall()
        rows.reverse()
        return len(rows)

    def prepare(self) -> int:
        kept: list[tuple[str, str, str | None]] = []
        used = 0
        for role, content, call_id, cost in self.db.execute(
            "SELECT role, content, call_id, tokens FROM m WHERE ws = ? AND conv = ? "
            "ORDER BY id DESC",
            (WORKSPACE, CONVERSATION),
        ):
            if used + cost > BUDGET:
                break
            used += cost
            kept.append((role, content, call_id))
        kept.reverse()
        return len(kept)

    def close(self) -> None:
        self.db.close()


# -- peers (peers.md anchors) -------------------------------------------------------------------


def _lc_counter(messages: list[Any]) -> int:
    # A list counter: a per-message counter would need a runtime BaseMessage annotation.
    return sum((len(m.content) + 3) // 4 for m in messages)


class LangChain(System):
    name = "LangChain SQLChatMessageHistory"
    get_note = "whole history (`messages`; no page API)"

    def _history(self, session: str) -> Any:
        from langchain_community.chat_message_histories import SQLChatMessageHistory

        return SQLChatMessageHistory(session_id=session, connection=self.engine)

    @staticmethod
    def _message(message: Msg) -> Any:
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        if message.role == "user":
            return HumanMessage(content=message.content)
        if message.role == "tool":
            return ToolMessage(content=message.content, tool_call_id=message.call_id or "")
        if message.call_id:
            call = {"name": TOOL, "args": TOOL_ARGS, "id": message.call_id}
            return AIMessage(content=message.content, tool_calls=[call])
        return AIMessage(content=message.content)

    def preload(self, target: list[Msg], others: dict[str, list[Msg]]) -> None:
        from sqlalchemy import create_engine

        warnings.filterwarnings("ignore")
        self.engine = create_engine(f"sqlite:///{self.folder / 'lc.sqlite3'}")
        for name, rows in [*others.items(), (CONVERSATION, target)]:
            chat = self._history(name)
            for chunk in _chunks(rows):  # add_messages: one transaction per call
                chat.add_messages([self._message(m) for m in chunk])
        self.history = self._history(CONVERSATION)

    def append(self, message: Msg) -> None:
        self.history.add_message(self._message(message))

    def get(self) -> int:
        return len(self.history.messages)

    def prepare(self) -> int:
        from langchain_core.messages import trim_messages

        window = trim_messages(
            self.history.messages,
            max_tokens=BUDGET,
            token_counter=_lc_counter,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        return len(window)

    def close(self) -> None:
        self.engine.dispose()


class OpenAIAgents(System):
    name = "OpenAI Agents SQLiteSession"
    get_note = "page of 50 (`get_items(limit)`)"

    @staticmethod
    def _item(message: Msg) -> dict[str, Any]:
        if message.role == "assistant" and message.call_id:
            return {
                "type": "function_call",
                "call_id": message.call_id,
                "name": TOOL,
                "arguments": '{"path": "src/app.py"}',
            }
        if message.role == "tool":
            return {
                "type": "function_call_output",
                "call_id": message.call_id,
                "output": message.content,
            }
        return {"role": message.role, "content": message.content}

    @staticmethod
    def _text(item: dict[str, Any]) -> str:
        return str(item.get("content") or item.get("output") or item.get("arguments") or "")

    def preload(self, target: list[Msg], others: dict[str, list[Msg]]) -> None:
        from agents.memory import SQLiteSession

        self.loop = asyncio.new_event_loop()
        path = self.folder / "agents.sqlite3"
        for name, rows in [*others.items(), (CONVERSATION, target)]:
            session = SQLiteSession(name, db_path=path)
            for chunk in _chunks(rows):  # add_items: one transaction per call
                self.loop.run_until_complete(session.add_items([self._item(m) for m in chunk]))
            session.close()
        self.session = SQLiteSession(CONVERSATION, db_path=path)

    def append(self, message: Msg) -> None:
        self.loop.run_until_complete(self.session.add_items([self._item(message)]))

    def get(self) -> int:
        return len(self.loop.run_until_complete(self.session.get_items(limit=PAGE)))

    def prepare(self) -> int:
        items = self.loop.run_until_complete(self.session.get_items())
        kept: list[dict[str, Any]] = []
        used = 0
        for item in reversed(items):  # the same newest-first token trim, by hand
            cost = (len(self._text(item)) + 3) // 4
            if used + cost > BUDGET:
                break
            kept.append(item)
            used += cost
        kept.reverse()
        while kept and kept[0].get("role") != "user":
            kept.pop(0)
        return len(kept)

    def close(self) -> None:
        self.session.close()
        self.loop.close()


class LlamaIndexMemory(System):
    name = "LlamaIndex Memory"
    get_note = "whole history (`aget_all`; no page API)"

    @staticmethod
    def _message(message: Msg) -> Any:
        from llama_index.core.llms import ChatMessage

        if message.role == "assistant" and message.call_id:
            call = {"id": message.call_id, "name": TOOL, "arguments": '{"path": "src/app.py"}'}
            return ChatMessage(
                role="assistant", content=message.content, additional_kwargs={"tool_calls": [call]}
            )
        if message.role == "tool":
            return ChatMessage(
                role="tool",
                content=message.content,
                additional_kwargs={"tool_call_id": message.call_id},
            )
        return ChatMessage(role=message.role, content=message.content)

    def _memory(self, session: str) -> Any:
        from llama_index.core.memory import Memory

        return Memory.from_defaults(
            session_id=session,
            token_limit=BUDGET,
            chat_history_token_ratio=1.0,
            token_flush_size=400,
            tokenizer_fn=lambda s: range((len(s) + 3) // 4),  # len() == tokens
            async_database_uri=f"sqlite+aiosqlite:///{self.folder / 'li.sqlite3'}",
        )

    async def _preload(self, name: str, rows: list[Msg]) -> None:
        """Its own store API: older messages straight into ``archived``, the newest that fit the
        budget (starting at a user message) into ``active`` — what ``put`` would have left."""
        from llama_index.core.storage.chat_store.base_db import MessageStatus

        memory = self._memory(name)
        active = 0
        used = 0
        for message in reversed(rows):
            if used + tokens(message.content) > BUDGET:
                break
            used += tokens(message.content)
            active += 1
        while active and rows[len(rows) - active].role != "user":
            active -= 1
        cut = len(rows) - active
        for chunk in _chunks(rows[:cut]):
            await memory.sql_store.add_messages(
                name, [self._message(m) for m in chunk], status=MessageStatus.ARCHIVED
            )
        if active:
            await memory.sql_store.add_messages(
                name, [self._message(m) for m in rows[cut:]], status=MessageStatus.ACTIVE
            )
        self.memories.append(memory)

    def preload(self, target: list[Msg], others: dict[str, list[Msg]]) -> None:
        warnings.filterwarnings("ignore")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.loop = asyncio.new_event_loop()
        self.memories: list[Any] = []
        for name, rows in [*others.items(), (CONVERSATION, target)]:
            self.loop.run_until_complete(self._preload(name, rows))
        self.memory = self.memories[-1]

    def append(self, message: Msg) -> None:
        self.loop.run_until_complete(self.memory.aput(self._message(message)))

    def get(self) -> int:
        return len(self.loop.run_until_complete(self.memory.aget_all()))

    def prepare(self) -> int:
        return len(self.loop.run_until_complete(self.memory.aget()))

    def close(self) -> None:
        self.loop.close()


SYSTEMS: dict[str, type[System]] = {
    "ours": OursInProcess,
    "stdio": OursStdio,
    "raw": RawSqlite,
    "langchain": LangChain,
    "agents": OpenAIAgents,
    "llamaindex": LlamaIndexMemory,
}
