"""From plan to messages: chat-style messages in plan order, or turns merged to alternate for
kinds that take system text at the top, opened by ``(continued)`` where a kind wants the user
first; the Chat Completions user message; the final-assistant-text trim."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from chat_history.providers.calls import Result
from chat_history.providers.images import chat_image_part, text_or_parts
from chat_history.providers.plan import AssistantTurn, Item, SystemText, UserTurn

#: Text of a user message inserted where a provider needs the conversation to open with the user
#: (or an assistant message where Mistral needs one between tool results and the next prompt).
CONTINUED = "(continued)"


def chat_user(turn: UserTurn) -> dict[str, Any]:
    """A user turn as a Chat Completions message: a string, or parts when it has images."""
    return {"role": "user", "content": text_or_parts(turn.segments, chat_image_part)}


def merge_adjacent(
    messages: Iterable[dict[str, Any]], role_key: str, content_key: str
) -> list[dict[str, Any]]:
    """Adjacent messages of one role joined into one, content lists concatenated in order."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1][role_key] == message[role_key]:
            merged[-1] = {
                **merged[-1],
                content_key: [*merged[-1][content_key], *message[content_key]],
            }
        else:
            merged.append(message)
    return merged


def chat_messages(
    items: Iterable[Item],
    *,
    user: Callable[[UserTurn], dict[str, Any]],
    assistant: Callable[[AssistantTurn], dict[str, Any]],
    results: Callable[[Sequence[Result]], Iterable[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Chat-style messages in plan order: a ``system`` message for each system text, in place;
    one message per user and assistant turn; ``results``' messages right after their calls."""
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, SystemText):
            messages.append({"role": "system", "content": item.text})
        elif isinstance(item, UserTurn):
            messages.append(user(item))
        elif isinstance(item, AssistantTurn):
            messages.append(assistant(item))
        else:
            messages.extend(results(item.results))
    return messages


def alternating_turns(
    items: Iterable[Item],
    *,
    user: Callable[[UserTurn], dict[str, Any]],
    assistant: Callable[[AssistantTurn], dict[str, Any]],
    results: Callable[[Sequence[Result]], dict[str, Any]],
    content_key: str,
    opener: dict[str, Any],
    settle: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """Turns for kinds that take system text at the top level and want user/assistant turns:
    system texts skipped; one message per user turn, assistant turn and group of results;
    adjacent messages of one role merged, then ``settle`` applied (when given); ``opener`` (a
    user message) put first when the turns open with another role."""
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, SystemText):
            continue
        if isinstance(item, UserTurn):
            messages.append(user(item))
        elif isinstance(item, AssistantTurn):
            messages.append(assistant(item))
        else:
            messages.append(results(item.results))
    merged = merge_adjacent(messages, "role", content_key)
    if settle is not None:
        merged = settle(merged)
    return opened_by_user(merged, opener)


def opened_by_user(messages: list[dict[str, Any]], opener: dict[str, Any]) -> list[dict[str, Any]]:
    """``messages`` with ``opener`` (a ``(continued)`` user message) put first when they open with
    another role (a history truncated, forked or imported to start with the assistant)."""
    if messages and messages[0]["role"] != "user":
        return [opener, *messages]
    return messages


def strip_final_assistant(
    messages: list[dict[str, Any]], is_text: Callable[[dict[str, Any]], bool]
) -> None:
    """Trailing whitespace removed from the text block (``is_text``) that ends a final assistant
    message's ``content``; a block left empty is dropped, and a message left empty too."""
    if not messages or messages[-1]["role"] != "assistant":
        return
    content = list(messages[-1]["content"])
    if content and is_text(content[-1]):
        stripped = content[-1]["text"].rstrip()
        if stripped:
            content[-1] = {**content[-1], "text": stripped}
        else:
            content.pop()
    if content:
        messages[-1] = {**messages[-1], "content": content}
    else:
        messages.pop()
