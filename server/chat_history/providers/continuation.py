"""How a body continues an interrupted reply (protocol.md "Version 4" → ``prepare``
``{continueId}``), per provider kind and model: the one place of these rules. The reply is the
newest row; the body never gains a user message the user did not write.

- ``"prefill"``: the reply is the final assistant message and the model carries on from its
  last character. Anthropic and Bedrock (Claude) for models that take a prefill, with trailing
  whitespace cut (Anthropic answers 400 "final assistant content cannot end with trailing
  whitespace"; what was cut is ``continueTrimmed``, for the client to put back); Mistral with
  ``"prefix": true`` on that message (without it: "Expected last role User or Tool (or
  Assistant with prefix True)"); Ollama, whose ``/api/chat`` continues a final assistant
  message (ollama/ollama#6778).
- ``"history"``: the reply is the last assistant message of the history and the model writes
  the next message (OpenAI Chat Completions and Responses, Cohere v2, Bedrock models other than
  Claude): no prefill API; the client appends what comes to the same row.
- ``"system"``: the provider or model refuses a body ending with an assistant turn — Gemini
  ("Please ensure that multiturn requests ends with a user role or a function response"),
  Claude from 4.6 on ("Prefill not supported") and any Claude reply that thought (extended
  thinking refuses a prefill). The reply leaves the messages and its text goes, as a note,
  into the system instruction, so the body ends with the user's own turn.

Sources are named in docs/semantics.md ("Continuing a reply")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from chat_history.model import Message

Shape = Literal["prefill", "history", "system"]

#: Claude model ids by family: ``claude-opus-4-6``, ``anthropic.claude-sonnet-4-6-v1:0``…
_CLAUDE = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d{1,2})(?:-(\d{1,2}))?(?!\d)")
#: The first Claude version that refuses a prefill.
NO_PREFILL_FROM = (4, 6)

NOTE = (
    "Your previous reply to the last message was interrupted before it ended. Its text so far "
    "is below, between the markers. Continue it from exactly where it stops, without "
    "repeating any of it.\n<<<interrupted reply>>>\n{text}\n<<<end of the interrupted reply>>>"
)


def takes_prefill(model: str | None) -> bool:
    """Whether a Claude ``model`` continues a final assistant message (unknown ids: yes)."""
    found = _CLAUDE.search(model or "")
    if found is None:
        return True
    version = (int(found.group(1)), int(found.group(2) or 0))
    return version < NO_PREFILL_FROM


def shape(kind: str, model: str | None, reply: Message) -> Shape:
    """How ``kind``'s body for ``model`` continues ``reply``."""
    if kind == "gemini":
        return "system"
    if kind in ("anthropic", "bedrock"):
        claude = kind == "anthropic" or "claude" in (model or "")
        if not claude:
            return "history"
        thought = bool((reply.provider_data.get("anthropic") or {}).get("thinking"))
        return "prefill" if takes_prefill(model) and not thought else "system"
    if kind in ("mistral", "ollama"):
        return "prefill"
    return "history"


@attrs.frozen
class Continuation:
    """The rows to format for a continuation, how, and the whitespace cut from the reply."""

    rows: tuple[Message, ...]
    shape: Shape
    trimmed: str


def continued(kind: str, model: str | None, rows: Sequence[Message]) -> Continuation | None:
    """The rows of a body continuing the newest row, an interrupted assistant reply (None when
    the rows do not end with one: nothing to continue)."""
    if not rows or rows[-1].role != "assistant" or rows[-1].status != "interrupted":
        return None
    reply = rows[-1]
    how = shape(kind, model, reply)
    if how == "system":
        note = Message(role="system", content=NOTE.format(text=reply.content))
        return Continuation((note, *rows[:-1]), how, "")
    if how == "prefill" and kind in ("anthropic", "bedrock"):
        kept = reply.content.rstrip()
        return Continuation(
            (*rows[:-1], attrs.evolve(reply, content=kept)), how, reply.content[len(kept) :]
        )
    return Continuation(tuple(rows), how, "")


def finish(kind: str, continuation: Continuation, body: dict[str, Any]) -> dict[str, Any]:
    """The formatted body of a continuation with what its kind adds: Mistral's ``prefix``."""
    if kind == "mistral" and continuation.shape == "prefill":
        messages = body.get("messages")
        if isinstance(messages, list) and messages and messages[-1].get("role") == "assistant":
            messages[-1] = {**messages[-1], "prefix": True}
    return body
