"""The benchmark workload, the same for every system: ~100-token messages, user and assistant
alternating, a tool exchange (a call and its result) every fourth turn, and one measured
conversation among 50 others of 100 messages in the same database."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

#: The request budget of every ``prepare`` (ours, the peers' trims and the raw baseline).
BUDGET = 4_000
#: Other conversations in each database, and their length: keying must not scan them.
OTHER_CONVERSATIONS = 50
OTHER_LENGTH = 100
#: ``get`` reads a page of the newest messages (the peers: the nearest their API offers).
PAGE = 50
WORKSPACE = "bench-ws"
CONVERSATION = "measured"
TOOL_EVERY = 4  # every fourth turn holds a tool exchange

_SOURCE = (
    "the function returns a list of rows from the table when the cache is cold and otherwise "
    "reads the newest page first so that editors can show recent history without waiting for "
    "older turns to load because each request carries only what the model needs"
)
_WORDS = _SOURCE.split()


@dataclass(frozen=True)
class Msg:
    """A generic message; each system converts it to its own shape. ``call_id`` marks a tool
    call (on an assistant row) or the result that answers it (on a tool row)."""

    role: str
    content: str
    call_id: str | None = None


def tokens(text: str) -> int:
    """The peers' approximate counter of peers.md (4 characters a token)."""
    return (len(text) + 3) // 4


def _text(rng: random.Random, index: int) -> str:
    words: list[str] = [f"m{index}"]
    length = len(words[0])
    while length < 396:  # ~100 tokens as (len + 3) // 4, ~104 with our +4 framing
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def messages(prefix: str = "") -> Iterator[Msg]:
    """An endless conversation: turn k is user + assistant, and every TOOL_EVERY-th turn is
    user, assistant call, tool result, assistant answer."""
    rng = random.Random(prefix)
    index = 0
    turn = 0
    while True:
        turn += 1
        yield Msg("user", _text(rng, index))
        index += 1
        if turn % TOOL_EVERY == 0:
            call = f"{prefix}call{index}"
            yield Msg("assistant", "Let me read the file.", call)
            yield Msg("tool", _text(rng, index + 1), call)
            index += 2
        yield Msg("assistant", _text(rng, index))
        index += 1


def take(count: int, prefix: str = "") -> list[Msg]:
    out: list[Msg] = []
    for message in messages(prefix):
        if len(out) == count:
            break
        out.append(message)
    return out


def split(count: int, prefix: str = "") -> tuple[list[Msg], Iterator[Msg]]:
    """The first ``count`` messages (preloaded) and an iterator over the rest (appended while
    measuring), so appends continue the same conversation."""
    stream = messages(prefix)
    head = [next(stream) for _ in range(count)]
    return head, stream
