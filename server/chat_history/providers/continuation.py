"""How a body continues an interrupted reply (protocol.md "Version 4" → ``prepare``
``{continueId}``; "Continuations (changed)"), per provider kind and model: the one place of
these rules. The reply is the newest row; the body never gains a user message the user did not
write, never sends an empty turn list, and never ends on another assistant row than the reply.

- ``"prefill"``: the reply is the final assistant message and the model carries on from its
  last character. Anthropic and Bedrock for Claude models known to take a prefill
  (``PREFILL_FAMILIES``), Mistral with ``"prefix": true`` on that message (without it:
  "Expected last role User or Tool (or Assistant with prefix True)"), Ollama, whose
  ``/api/chat`` continues a final assistant message (ollama/ollama#6778).
- ``"history"``: the reply is the last assistant message of the history and the model writes
  the next message (OpenAI Chat Completions and Responses, Cohere v2, Bedrock models read as
  other than Claude): no prefill API; the client appends what comes to the same row.
- ``"system"``: the provider or model refuses a body ending with an assistant turn — Gemini
  ("Please ensure that multiturn requests ends with a user role or a function response"),
  Claude from 4.6 on ("Prefilling assistant messages is not supported for this model"), a
  Claude model not known to take a prefill (an id from after this table, an opaque ARN, none),
  and any Claude reply that thought (extended thinking refuses a prefill). The reply leaves the
  messages and its text goes, as a note (``NOTE``), into the system instruction as one block
  after the application's system prompt, whose blocks and cache mark stay as a request without
  the note has them (``finish``); the body ends with the user's own turn.
- The application's turn: the note as one user turn ``[Application instruction]\\n<note>`` at
  the end, where the body would otherwise end on another assistant row or send no turn: after
  another assistant reply (for the note's targets, and for any target when the reply has no
  text to send), and for a reply that is all there is where the kind wants a user turn first
  (Anthropic, Bedrock, Gemini, Mistral), never behind an invented ``(continued)`` user message.
  It is the rendering every kind gives the application's text after the assistant's last reply
  (``plan.trailing_instruction``). In a prefill or history shape, a reply with no text after
  a user turn (or tool results) is not sent: the body ends on that turn.

Anthropic and Bedrock refuse a final assistant text that ends with whitespace ("final assistant
content cannot end with trailing whitespace"): what is cut is ``continueTrimmed``, for the client
to put back; it is exactly what the body leaves out of the reply's text ("" when the note
carries all of it).

Model ids are read as the provider reads them (``claude_family``): any case, an ARN's resource
id (an ARN that names no model, such as an application inference profile, is unknown), Bedrock's
geography prefix and ``anthropic.`` vendor prefix, version and date suffixes. Sources are named
in docs/semantics.md ("Continuing a reply")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from chat_history.model import Message
from chat_history.providers.bedrock_caching import bare_model_id
from chat_history.providers.plan import APPLICATION_INSTRUCTION, AssistantTurn, SystemText, plan

Shape = Literal["prefill", "history", "system"]

#: Claude families known to continue a final assistant message (Anthropic's models overview:
#: Claude 3, 3.5, 3.7, 4, 4.1 and 4.5; "Prefilling assistant messages returns a 400 error on
#: Claude 4.6 models", and on every later one). A family not listed gets the note.
PREFILL_FAMILIES = frozenset(
    {
        "claude-3-haiku",
        "claude-3-sonnet",
        "claude-3-opus",
        "claude-3-5-haiku",
        "claude-3-5-sonnet",
        "claude-3-7-sonnet",
        "claude-sonnet-4",
        "claude-sonnet-4-0",
        "claude-opus-4",
        "claude-opus-4-0",
        "claude-opus-4-1",
        "claude-haiku-4-5",
        "claude-sonnet-4-5",
        "claude-opus-4-5",
    }
)
#: A version suffix, taken off one at a time from the end: Bedrock's ``-v1``, ``:0`` and context
#: variant ``:200k``, a date (``-20250929``, Vertex's ``@20250929``), an alias's ``-latest``.
_VERSION = re.compile(r"(?:-v\d+|:\d+k?|[-@]\d{8}|-latest)\Z")
#: Kinds whose body must open with a user turn (the formatters' ``(continued)`` opener).
_USER_FIRST = frozenset({"anthropic", "bedrock", "gemini", "mistral"})
#: Kinds that cut trailing whitespace from a final assistant message (``strip_final_assistant``).
_TRIMMING = frozenset({"anthropic", "bedrock"})

NOTE = (
    "Your previous reply to the last message was interrupted before it ended. Its text so far "
    "is below, between the markers. Continue it from exactly where it stops, without "
    "repeating any of it.\n<<<interrupted reply>>>\n{text}\n<<<end of the interrupted reply>>>"
)


def claude_family(model: str | None) -> str | None:
    """The family a Claude ``model`` id names (``claude-opus-4-6`` for
    ``arn:…:inference-profile/us.anthropic.claude-opus-4-6-v1:0``), read in any case; None when
    ``model`` is not read as Claude (another model, an ARN naming no model, none)."""
    if not model:
        return None
    bare = bare_model_id(model).removeprefix("anthropic.")
    if not bare.startswith("claude"):
        return None
    while (suffix := _VERSION.search(bare)) is not None:
        bare = bare[: suffix.start()]
    return bare


def takes_prefill(model: str | None) -> bool:
    """Whether ``model`` is a Claude model known to continue a final assistant message."""
    return claude_family(model) in PREFILL_FAMILIES


def _other_than_claude(model: str | None) -> bool:
    """A Bedrock model id read as a model other than Claude: not Anthropic's, nor an ARN that
    names no model (which may route to any)."""
    if not model:
        return False
    bare = bare_model_id(model)
    return not bare.startswith("arn:") and "anthropic" not in bare and "claude" not in bare


def shape(kind: str, model: str | None, reply: Message) -> Shape:
    """How ``kind``'s body for ``model`` would carry ``reply`` by the kind and model alone
    (``continued`` may still make the note the application's turn)."""
    if kind == "gemini":
        return "system"
    if kind == "bedrock" and _other_than_claude(model):
        return "history"
    if kind in ("anthropic", "bedrock"):
        thought = bool((reply.provider_data.get("anthropic") or {}).get("thinking"))
        return "prefill" if takes_prefill(model) and not thought else "system"
    if kind in ("mistral", "ollama"):
        return "prefill"
    return "history"


@attrs.frozen
class Continuation:
    """The rows to format for a continuation, what the body leaves out of the reply's text
    (``continueTrimmed``), and the note ``finish`` puts in the system instruction."""

    rows: tuple[Message, ...]
    trimmed: str
    note: str | None = None


def continued(kind: str, model: str | None, rows: Sequence[Message]) -> Continuation:
    """The rows of a body continuing the newest row, an interrupted assistant reply. Rows that
    do not end with one lost the reply to the orphan sweep (it had only unanswered calls and no
    text): there is no text of it to send."""
    if rows and rows[-1].role == "assistant" and rows[-1].status == "interrupted":
        reply, before = rows[-1], tuple(rows[:-1])
    else:
        reply, before = Message(role="assistant", status="interrupted"), tuple(rows)
    how = shape(kind, model, reply)
    ends = _last_turn(before)
    note = NOTE.format(text=reply.content)
    if how == "system" and ends == "user":
        return Continuation(before, "", note)
    if how != "system":
        kept = reply.content.rstrip() if kind in _TRIMMING else reply.content
        if kept.strip() and (ends is not None or kind not in _USER_FIRST):
            return Continuation(
                (*before, attrs.evolve(reply, content=kept)), reply.content[len(kept) :]
            )
        if not kept.strip() and ends == "user":  # nothing of the reply to send
            return Continuation(before, reply.content)
    turn = Message(role="user", content=f"{APPLICATION_INSTRUCTION}\n{note}")
    return Continuation((*before, turn), "")


def _last_turn(rows: Sequence[Message]) -> Literal["user", "assistant"] | None:
    """Which side sends the last turn of ``rows``' body (tool results are the user's side), as
    every formatter plans it; None when only system text would be sent."""
    last = next((item for item in reversed(plan(rows)) if not isinstance(item, SystemText)), None)
    if last is None:
        return None
    return "assistant" if isinstance(last, AssistantTurn) else "user"


def finish(kind: str, continuation: Continuation, body: dict[str, Any]) -> dict[str, Any]:
    """The formatted body of a continuation with its note, if any, as the system instruction's
    last block: after the application's system prompt, which keeps its blocks and cache mark."""
    note = continuation.note
    if note is None:
        return body
    if kind == "gemini":
        parts = (body.get("systemInstruction") or {}).get("parts", [])
        return {"systemInstruction": {"parts": [*parts, {"text": note}]}} | _without(body, kind)
    system = body.get("system") or []
    if kind == "anthropic":
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        return {"system": [*blocks, {"type": "text", "text": note}]} | _without(body, kind)
    return {"system": [*system, {"text": note}]} | _without(body, kind)


def _without(body: dict[str, Any], kind: str) -> dict[str, Any]:
    """``body`` without its system instruction (which ``finish`` puts first, as formatters do)."""
    key = "systemInstruction" if kind == "gemini" else "system"
    return {name: value for name, value in body.items() if name != key}
