"""A provider's refusal of the state a request carried, told from its own error answer
(``chatHistory/reportProviderError``; protocol.md "Version 5"): which of the four refusals it
is, and which rules of ``state_rules`` name the state that caused it. The texts are the
providers' own, each with where it was seen; anything else is no refusal of state. The error
is read here and nowhere else, and nothing of it is kept: only the refusal's name leaves.

- ``thinking_signature`` (Anthropic): ``messages.N.content.M: Invalid `signature` in
  `thinking` block`` (openclaw#88932, anthropic-sdk-python#1598); ``thinking or
  redacted_thinking blocks in the latest assistant message cannot be modified`` (claude-code,
  stepcodex "Summarized thinking blocks fail signature validation");
  ``thinking.signature: Field required`` (anomalyco/opencode#25003).
- ``encrypted_content`` (OpenAI Responses): code ``invalid_encrypted_content``, "The encrypted
  content gAAA… could not be verified." (openai/codex#8119, #8145); it names reasoning items
  and compaction items alike (Wei-Shaw/sub2api PR #5084 strips both), so both are fenced.
- ``thought_signature`` (Gemini): "Function call is missing a thought_signature in
  functionCall parts." (manthanabc/paws#103), "Corrupted thought signature."
  (google-gemini/gemini-cli#13467), "Thought signature is not valid"
  (decolua/9router#301): the placeholder goes on the calls (``state_rules``).
- ``compaction`` (a compaction item the backend did not mint): "Could not decode the
  compaction blob. Ensure it is unmodified from the compact response." (opencodex PR #2228);
  Anthropic's ``compaction_signature_invalid`` and ``compaction_content_mismatch`` error codes
  (``error.details.error_code``, anthropic SDK 2.17's error types)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import attrs

#: The status a refusal comes with: a client error (gateways relay it as 400, some as 429).
REFUSAL_STATUSES = range(400, 500)
#: The most text of an answer the classifier reads (the texts above sit near its start).
MAX_READ_CHARS = 64_000


@attrs.frozen
class Refusal:
    """One kind of refusal: its name (``reportProviderError``'s ``reason``), the provider kinds
    whose answers say it, how their text says it, and the rules whose state is fenced: the
    state that was sent, or (``missing``) the calls that went without it."""

    reason: str
    kinds: tuple[str, ...]
    pattern: re.Pattern[str]
    states: tuple[str, ...]
    missing: bool = False


REFUSALS: tuple[Refusal, ...] = (
    Refusal(
        "thinking_signature",
        ("anthropic",),
        re.compile(
            r"invalid `?signature`? in `?thinking`? block"
            r"|`?thinking`? or `?redacted_thinking`? blocks in the latest assistant message "
            r"cannot be modified"
            r"|thinking\.signature: field required",
            re.IGNORECASE,
        ),
        ("anthropic.thinking",),
    ),
    Refusal(
        "encrypted_content",
        ("openai-responses",),
        re.compile(
            r"invalid_encrypted_content|the encrypted content\b.*\bcould not be verified",
            re.IGNORECASE | re.DOTALL,
        ),
        ("openai-responses.reasoning", "openai-responses.compaction"),
    ),
    Refusal(
        "thought_signature",
        ("gemini",),
        re.compile(r"function call is missing a thought_signature", re.IGNORECASE),
        ("gemini.signatures",),
        missing=True,
    ),
    Refusal(
        "thought_signature",
        ("gemini",),
        re.compile(r"corrupted thought signature|thought signature is not valid", re.IGNORECASE),
        ("gemini.signatures",),
    ),
    Refusal(
        "compaction",
        ("openai-responses", "anthropic"),
        re.compile(
            r"could not decode the compaction blob|compaction_signature_invalid"
            r"|compaction_content_mismatch",
            re.IGNORECASE,
        ),
        ("openai-responses.compaction", "anthropic.compaction"),
    ),
)


def _texts(value: Any, budget: list[int]) -> Iterator[str]:
    """Every string of a JSON value (keys of objects too: a gateway may nest the provider's
    answer as text), depth first, until ``budget`` characters were read."""
    stack = [value]
    while stack and budget[0] > 0:
        node = stack.pop()
        if isinstance(node, str):
            budget[0] -= len(node)
            yield node
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))


def classify(kind: str, status: int, body: Any) -> Refusal | None:
    """The refusal ``kind``'s error answer (``status``, ``body``: a JSON value or its text)
    says, or None when it says no refusal of state."""
    if status not in REFUSAL_STATUSES:
        return None
    text = "\n".join(_texts(body, [MAX_READ_CHARS]))[:MAX_READ_CHARS]
    for refusal in REFUSALS:
        if kind in refusal.kinds and refusal.pattern.search(text):
            return refusal
    return None
