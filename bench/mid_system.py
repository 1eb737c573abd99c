"""System rows mid-conversation (issue 35 item 2), measured for ``bench/economy.py``: what a
system row the application adds during a session costs in prompt-cache reads, and what
standing its text keeps in each provider's body.

- **Cache reads**: the coding session of ``economy.py`` (ours, recommended settings, 32k), with
  a system row ("From now on …") appended after every 25th turn's reply, its Anthropic bodies
  served by the same cache model. Two renderings: the server's (the row stays in place, as an
  ``[Application instruction]`` user turn), and the one before issue 35 (every later system row
  folded into the top-level ``system``), rebuilt from the server's body by moving those
  instruction blocks into ``system``; the session without system rows is the reference.
- **Authority**: for every kind, a body with one later system row after an assistant reply:
  where its text lands (the system prompt at the top, a system-role message in place, or a
  labelled user turn in place), and whether the body before the row is sent again byte for byte
  once it is added.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import economy_model
from economy_model import Ours, Step

from chat_history.model import Message
from chat_history.providers import KINDS, format_body
from chat_history.providers.plan import APPLICATION_INSTRUCTION

EVERY = 25
BUDGET = 32_000
SECTION = "## System rows mid-conversation"
_LABEL = APPLICATION_INSTRUCTION + "\n"


def with_system_rows(kind: str, every: int = EVERY) -> Iterator[Step]:
    """The scripted session with a system row after every ``every``-th turn's reply."""
    turn = 0
    for step in economy_model.session(kind):
        yield step
        if not step.request:  # the reply that ends a turn
            turn += 1
            if turn % every == 0:
                text = f"From now on, keep answers under {turn} words."
                yield Step((Message(role="system", content=text),), False)


def folded(body: dict[str, Any]) -> dict[str, Any]:
    """The body as the formatter built it before issue 35: the instruction blocks of every
    message but the final one moved into the top-level ``system`` (joined by a blank line)."""
    messages = body["messages"]
    texts: list[str] = []
    kept: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        content = message["content"]
        if index == len(messages) - 1 or not isinstance(content, list):
            kept.append(message)
            continue
        blocks = []
        for block in content:
            if block.get("type") == "text" and str(block["text"]).startswith(_LABEL):
                texts.append(str(block["text"])[len(_LABEL) :])
            else:
                blocks.append(block)
        kept.append({**message, "content": blocks})
    if not texts:
        return body
    system = [dict(block) for block in body["system"]]
    system[-1]["text"] = "\n\n".join([system[-1]["text"], *texts])
    return {**body, "system": system, "messages": kept}


def cache_runs(folder: Path) -> list[tuple[str, economy_model.Usage]]:
    """(rendering, usage) for the session without system rows, with them in place (ours), and
    with them folded into ``system`` (before)."""
    runs: list[tuple[str, economy_model.Usage]] = []
    for name, steps, transform in (
        ("no later system rows", economy_model.session, None),
        ("system rows in place (now)", with_system_rows, None),
        ("system rows folded into system (before)", with_system_rows, folded),
    ):
        sub = folder / str(len(runs))
        sub.mkdir(mode=0o700)
        system = Ours(name, economy_model.ours_recommended(BUDGET), sub)
        cache = economy_model.AnthropicCache()
        try:
            for step in steps("coding"):
                system.append(step.rows)
                if step.request:
                    body = system.body()
                    cache.serve(transform(body) if transform else body)
        finally:
            system.close()
        runs.append((name, cache.usage))
        print(f"{name:42} cached {cache.usage.share:5.3f}  cost ${cache.usage.cost:6.2f}")
    return runs


def _history() -> list[Message]:
    return [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Add tests."),
        Message(role="assistant", content="Added three."),
    ]


def placement(kind: str) -> tuple[str, bool]:
    """Where a later system row's text lands in ``kind``'s body, and whether the body before
    it is sent again byte for byte."""
    text = "Answer in French from now on."
    before = format_body(kind, _history())
    after = format_body(
        kind,
        [*_history(), Message(role="system", content=text), Message(role="user", content="Go")],
    )
    key = next(k for k in ("messages", "contents", "input") if k in after)
    head_same = {k: v for k, v in before.items() if k != key} == {
        k: v for k, v in after.items() if k != key
    }
    prefix = before[key][:-1]  # the final assistant turn may be trimmed or marked as a prefill
    same = head_same and after[key][: len(prefix)] == prefix
    holder = next((m for m in after[key] if text in json.dumps(m)), None)
    if holder is None:
        where = "system prompt (top level)"
    elif holder.get("role") in ("system", "developer"):
        where = "system message, in place"
    else:
        where = "user turn `[Application instruction]`, in place"
    return where, same


def section(runs: list[tuple[str, economy_model.Usage]]) -> list[str]:
    lines = [
        SECTION,
        "",
        "`bench/mid_system.py` (run by `bench/economy.py`): the coding session at 32k, ours "
        f"recommended, with a system row appended after every {EVERY}th turn's reply, Anthropic "
        'bodies and cache as above. The "before" row is the server\'s bodies with the '
        "instruction blocks moved into `system`, as the formatter placed them until issue 35.",
        "",
        "| rendering | cached share | input cost | × uncached |",
        "|---|---|---|---|",
    ]
    for name, usage in runs:
        lines.append(
            f"| {name} | {usage.share:.3f} | ${usage.cost:.2f} | "
            f"{usage.cost / usage.plain_cost:.2f} |"
        )
    lines += [
        "",
        "Where a later system row's text lands, per kind (a body with one after an assistant "
        "reply), and whether the body before it is sent again unchanged:",
        "",
        "| kind | the row's text | bytes before it unchanged |",
        "|---|---|---|",
    ]
    system_level = 0
    for kind in KINDS:
        where, same = placement(kind)
        system_level += where.startswith("system")
        lines.append(f"| {kind} | {where} | {'yes' if same else 'no'} |")
    lines += [
        "",
        f"System authority kept by {system_level} of {len(KINDS)} kinds; the others have no "
        "system position after an assistant reply except the top of the request, which a "
        "change there would invalidate with everything cached after it; they get the "
        "application's instruction, labelled, in place.",
        "",
    ]
    return lines
