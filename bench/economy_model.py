"""What ``bench/economy.py`` and ``bench/mid_system.py`` both run (economy.py's docstring tells the
method): the scripted sessions, Anthropic's prompt cache computed from bodies, and ours as a
system over the real manager with its settings."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chat_history.model import Message, ToolCall

TURNS = 300
PRICE = 3.0  # $ per million input tokens
WRITE, READ = 1.25, 0.1
MINIMUM = 1_024  # Anthropic's smallest cacheable prefix (Sonnet, Opus)
LOOKBACK = 20
RECOMMENDED_LOW_WATER = 0.75

_SOURCE = (
    "the function reads rows from the table and returns the newest page first so that the "
    "editor shows recent history without waiting while older turns load lazily from disk when "
    "a request needs them and the cache keeps what was read before under a lock"
)
_WORDS = _SOURCE.split()

SYSTEM_PROMPT = (
    "You are a coding assistant working in the user's repository. Read files before changing "
    "them, run the tests after every change, keep answers short. " * 24
).strip()


# -- the sessions ---------------------------------------------------------------------------------


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


@dataclass(frozen=True)
class Step:
    """One event of a session: rows appended, then (``request``) a model call is prepared."""

    rows: tuple[Message, ...]
    request: bool


def session(kind: str, turns: int = TURNS) -> Iterator[Step]:
    """The scripted session: each turn's prompt, then per tool call the carrier and its output,
    then the reply; a request after the prompt and after every tool output."""
    rng = random.Random(f"economy-{kind}")
    for turn in range(1, turns + 1):
        yield Step((Message(role="user", content=f"t{turn} " + _text(rng, 60, 700)),), True)
        calls = rng.choices((0, 1, 2, 3), (0.3, 0.4, 0.2, 0.1))[0] if kind == "coding" else 0
        for call in range(calls):
            call_id = f"c{turn}_{call}"
            tool = rng.choice(("read_file", "grep", "run_tests"))
            carrier = Message(
                role="assistant",
                content=_text(rng, 20, 200),
                tool_calls=(ToolCall(id=call_id, name=tool, arguments={"arg": f"src/m{turn}.py"}),),
            )
            output = Message(
                role="tool",
                content=_text(rng, 300, 9_000),
                tool_call_id=call_id,
                name=tool,
            )
            yield Step((carrier, output), True)
        yield Step((Message(role="assistant", content=_text(rng, 200, 2_500)),), False)


# -- Anthropic's prompt cache, from bodies -------------------------------------------------------


def _block_tokens(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        text = str(block["text"])
    elif kind == "tool_use":
        text = str(block["name"]) + json.dumps(block["input"], separators=(",", ":"))
    elif kind == "tool_result":
        content = block.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
    else:
        text = json.dumps(block)
    return math.ceil(len(text.encode()) / 4)


def _blocks(body: dict[str, Any]) -> list[tuple[int, str, bool]]:
    """(tokens, identity, carries a breakpoint) of each block in prefix order: system, then every
    message's content (a message's first block carries its 4 framing tokens)."""
    out: list[tuple[int, str, bool]] = []
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system or ():
        out.append((_block_tokens(block), _identity("system", block), "cache_control" in block))
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for index, block in enumerate(content):
            framing = 4 if index == 0 else 0
            role = message["role"] + ("+" if index == 0 else "")
            out.append(
                (_block_tokens(block) + framing, _identity(role, block), "cache_control" in block)
            )
    return out


def _identity(role: str, block: dict[str, Any]) -> str:
    bare = {k: v for k, v in block.items() if k != "cache_control"}
    return role + json.dumps(bare, sort_keys=True)


@dataclass
class Usage:
    requests: int = 0
    total: int = 0
    read: int = 0
    written: int = 0

    @property
    def uncached(self) -> int:
        return self.total - self.read - self.written

    @property
    def share(self) -> float:
        return self.read / self.total if self.total else 0.0

    @property
    def cost(self) -> float:
        return (self.uncached + WRITE * self.written + READ * self.read) * PRICE / 1e6

    @property
    def plain_cost(self) -> float:
        return self.total * PRICE / 1e6


@dataclass
class AnthropicCache:
    """Prefixes written at breakpoints; a request reads the longest one it finds at one of its
    breakpoints or in the 20 blocks before it, and writes up to its last breakpoint."""

    entries: set[bytes] = field(default_factory=set)
    usage: Usage = field(default_factory=Usage)
    #: per request: (tokens read from the cache, input tokens)
    requests: list[tuple[int, int]] = field(default_factory=list)

    def serve(self, body: dict[str, Any]) -> None:
        blocks = _blocks(body)
        totals: list[int] = []
        hashes: list[bytes] = []
        digest = hashlib.sha256()
        running = 0
        for tokens, identity, _ in blocks:
            running += tokens
            digest.update(identity.encode())
            totals.append(running)
            hashes.append(digest.copy().digest())
        marks = [index for index, block in enumerate(blocks) if block[2]]
        read = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - LOOKBACK), -1):
                if hashes[index] in self.entries:
                    read = max(read, totals[index])
                    break
        written = 0
        if marks and totals[marks[-1]] >= MINIMUM and totals[marks[-1]] > read:
            written = totals[marks[-1]] - read
        for mark in marks:
            if totals[mark] >= MINIMUM:
                self.entries.add(hashes[mark])
        self.usage.requests += 1
        self.usage.total += running
        self.usage.read += read
        self.usage.written += written
        self.requests.append((read, running))


def _mark(block: dict[str, Any]) -> None:
    block["cache_control"] = {"type": "ephemeral"}


def _as_blocks(container: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = container[key]
    if isinstance(value, str):
        value = [{"type": "text", "text": value}]
        container[key] = value
    blocks: list[dict[str, Any]] = value
    return blocks


def has_markers(body: dict[str, Any]) -> bool:
    return "cache_control" in json.dumps(body)


_NOTE = re.compile(r"^\[(earlier turns omitted|Summary of earlier turns)")


def spec_markers(body: dict[str, Any]) -> dict[str, Any]:
    """protocol.md "Prompt caches" for an anthropic body that has none yet (until the
    server's own markers land): the last block of ``system``, of the context note, of the
    newest user message that is not the final one, and of the final message."""
    if has_markers(body):
        return body
    if body.get("system"):
        _mark(_as_blocks(body, "system")[-1])
    messages = body["messages"]
    for message in messages:
        blocks = _as_blocks(message, "content")
        notes = [b for b in blocks if b.get("type") == "text" and _NOTE.match(b["text"])]
        if message["role"] == "user" and notes:
            _mark(notes[-1])
            break
    users = [m for m in messages[:-1] if m["role"] == "user"]
    if users:
        _mark(_as_blocks(users[-1], "content")[-1])
    if messages:
        _mark(_as_blocks(messages[-1], "content")[-1])
    return body


def hand_markers(body: dict[str, Any]) -> dict[str, Any]:
    """What a careful user of a peer adds: a breakpoint on the system prompt and on the final
    message."""
    if body.get("system"):
        _mark(_as_blocks(body, "system")[-1])
    if body["messages"]:
        _mark(_as_blocks(body["messages"][-1], "content")[-1])
    return body


# -- the systems ----------------------------------------------------------------------------------


class System:
    """Appends a session's rows and answers each request's Anthropic body."""

    name = ""

    def append(self, rows: Sequence[Message]) -> None:
        raise NotImplementedError

    def body(self) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Ours(System):
    def __init__(self, name: str, settings: dict[str, Any], folder: Path) -> None:
        from chat_history.service import history
        from chat_history.service.manager import ChatHistoryManager
        from chat_history.settings import load_settings
        from chat_history.store import Key, Store

        self.name = name
        self.store = Store(folder)
        self.manager = ChatHistoryManager(self.store, load_settings(settings).settings)
        self.key = Key("bench-ws", "economy")
        history.append(self.manager, self.key, [Message(role="system", content=SYSTEM_PROMPT)])

    def append(self, rows: Sequence[Message]) -> None:
        from chat_history.service import history

        history.append(self.manager, self.key, rows)

    def body(self) -> dict[str, Any]:
        from chat_history.service import history
        from chat_history.service.preparation import PrepareOptions

        prepared = history.prepare(self.manager, self.key, PrepareOptions(provider="anthropic"))
        return spec_markers(json.loads(json.dumps(prepared.body)))

    def close(self) -> None:
        self.store.close()


def ours_recommended(budget: int) -> dict[str, Any]:
    return {
        "maxMessages": 1_000_000,
        "maxTokens": 0,
        "context": {"maxContextTokens": budget, "trimLowWater": RECOMMENDED_LOW_WATER},
    }


def ours_sliding(budget: int) -> dict[str, Any]:
    settings = ours_recommended(budget)
    settings["context"] = {"maxContextTokens": budget}
    return settings


def ours_defaults(budget: int) -> dict[str, Any]:
    return {"context": {"maxContextTokens": budget}}
