"""Terminal text of the CLI: the conversations table and ``show``'s readable history, in which
every tool call is printed with the result that answered it."""

from __future__ import annotations

import json
import re
from collections import defaultdict, deque
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from chat_history.model import Key, StoredMessage, Summary, ToolCall
from chat_history.policy.prepare.compaction import covered_row_ids
from chat_history.policy.search.rank import SearchHit
from chat_history.service.conversations import ConversationInfo
from chat_history.service.storage_retention import PruneRun
from chat_history.settings import Settings

#: Without --full, a tool result or call arguments are cut to this many characters / lines.
PREVIEW_CHARS = 1_000
PREVIEW_LINES = 12


#: C0 controls but tab and newline, DEL, and C1 controls: ESC (colours, OSC 52 clipboard writes,
#: window titles), the one-byte CSI/OSC of C1, carriage return and backspace (overwriting a line).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` for a terminal: every control character that is not a tab or newline shown as
    ``\\xNN``, so stored text cannot drive the terminal (JSON output stays exact)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def when(epoch_ms: int | None) -> str:
    """Local date and time (seconds) of epoch milliseconds."""
    if epoch_ms is None:
        return "-"
    return datetime.fromtimestamp(epoch_ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def plural(count: int, noun: str) -> str:
    """``count`` with its noun, plural unless 1 (``1 conversation``, ``2 conversations``)."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """Lines of a table: columns as wide as their widest cell, those in ``right`` right-aligned."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), *(line(r) for r in rows)]


def conversations_table(by_workspace: Sequence[tuple[str, Sequence[ConversationInfo]]]) -> str:
    """``conversations``: per workspace, one line per conversation with its rows, tokens, last
    activity and whether it has a summary."""
    out: list[str] = []
    for workspace, records in by_workspace:
        out.append(f"{terminal_safe(workspace)}  ({plural(len(records), 'conversation')})")
        rows = [
            [
                terminal_safe(r.conversation_id),
                f"{r.message_count:,}",
                f"{r.tokens:,}",
                when(r.last_activity),
                "yes" if r.has_summary else "no",
            ]
            for r in records
        ]
        header = ["CONVERSATION", "MESSAGES", "TOKENS", "LAST ACTIVITY", "SUMMARY"]
        out.extend("  " + line for line in table(header, rows, right={1, 2}))
        out.append("")
    return "\n".join(out).rstrip("\n")


def _preview(text: str, full: bool) -> str:
    if full:
        return text
    lines = text.split("\n")
    cut = "\n".join(lines[:PREVIEW_LINES])[:PREVIEW_CHARS]
    if len(cut) < len(text):
        return f"{cut}\n[... {len(text) - len(cut):,} more characters; --full shows all]"
    return cut


def _indented(text: str, depth: int) -> list[str]:
    pad = "    " * depth
    return [pad + line if line else "" for line in text.split("\n")]


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _extras(row: StoredMessage) -> list[str]:
    notes: list[str] = []
    for a in row.attachments:
        where = f"{len(a.data):,} base64 characters inline" if a.data is not None else a.uri
        notes.append(f"[{a.kind} {a.mime_type or ''} {where}]".replace("  ", " "))
    if row.provider_data:
        notes.append(f"[providerData: {', '.join(sorted(row.provider_data))}]")
    if row.metadata:
        notes.append(f"[metadata: {_preview(_compact(dict(row.metadata)), False)}]")
    return notes


def history_text(
    key: Key, rows: Sequence[StoredMessage], summary: Summary | None, *, full: bool = False
) -> str:
    """``show``: the conversation's totals, its summary, then every row by turn, each call with
    its result under it."""
    covered = covered_row_ids(rows, summary)
    out = _history_head(key, rows, summary, covered)
    # Each call's result: the first tool row of the same turn answering its id.
    answers: dict[tuple[int, str], deque[StoredMessage]] = defaultdict(deque)
    for row in rows:
        if row.role == "tool" and row.tool_call_id is not None:
            answers[(row.turn, row.tool_call_id)].append(row)
    shown: set[int] = set()
    turn: int | None = None
    for row in rows:
        if row.id in shown:
            continue
        if row.turn != turn:
            turn = row.turn
            out += ["", f"--- turn {turn} ---"] if turn > 0 else [""]
        mark = "  [summarized]" if row.id in covered else ""
        out.append(f"[{when(row.timestamp)}] {row.role} #{row.id}{mark}")
        if row.role == "tool":  # a result whose call is not in the history
            out.append(
                f"    result of {row.name or 'a tool'} for call {row.tool_call_id} (no call)"
            )
            out += _indented(_preview(row.content, full), 2)
        elif row.content or not row.tool_calls:
            out += _indented(row.content if row.content else "(empty)", 1)
        for call in row.tool_calls:
            out += _call_lines(row, call, answers, shown, full)
        out += ["    " + note for note in _extras(row)]
    return terminal_safe("\n".join(out))


def _history_head(
    key: Key, rows: Sequence[StoredMessage], summary: Summary | None, covered: frozenset[int]
) -> list[str]:
    """``show``'s first lines: the totals, then the summary and what it stands in for."""
    turns = len({row.turn for row in rows if row.turn > 0})
    tokens = sum(row.tokens for row in rows)
    out = [f"Conversation {key.conversation!r} in workspace {key.workspace!r}"]
    span = f", {when(rows[0].timestamp)} to {when(rows[-1].timestamp)}" if rows else ""
    out.append(f"{plural(len(rows), 'message')}, {plural(turns, 'turn')}, {tokens:,} tokens{span}")
    if summary is not None:
        through = summary.covers_through_id
        covers = f", covers through #{through}" if through is not None else ""
        if covered:
            stood_in = len({row.turn for row in rows if row.id in covered})
            covers += (
                f": sent instead of {plural(stood_in, 'turn')} "
                f"({plural(len(covered), 'message')} marked [summarized])"
            )
        out += ["", f"Summary (updated {when(summary.updated_at)}{covers}):"]
        out += _indented(summary.summary, 1)
    return out


def _call_lines(
    row: StoredMessage,
    call: ToolCall,
    answers: dict[tuple[int, str], deque[StoredMessage]],
    shown: set[int],
    full: bool,
) -> list[str]:
    """One call of ``row`` and the result that answers it (marked ``shown``)."""
    arguments = _preview(_compact(call.arguments), full)
    out = [f"    call {call.name} {arguments}  (id {call.id})"]
    pending = answers.get((row.turn, call.id), deque())
    while pending and pending[0].id < row.id:  # an earlier row's answer, not this call's
        pending.popleft()
    result = pending.popleft() if pending else None
    if result is None:
        return [*out, "        -> no result recorded"]
    shown.add(result.id)
    named = f" from {result.name}" if result.name else ""
    out.append(f"        -> result{named} #{result.id} [{when(result.timestamp)}]")
    out += _indented(_preview(result.content, full), 3)
    out += ["            " + note for note in _extras(result)]
    return out


def prune_text(run: PruneRun, settings: Settings) -> str:
    """``prune``'s report: the totals, one line per rule with its limit, one per conversation."""
    verb = "Would delete" if run.dry_run else "Deleted"
    lines = ["Dry run: nothing was deleted."] if run.dry_run else []
    summaries = run.deleted_summaries
    lines.append(
        f"{verb} {run.dropped_messages:,} message(s) in {len(run.conversations):,} of "
        f"{run.checked:,} conversation(s), and {summaries} expired "
        f"summar{'y' if summaries == 1 else 'ies'}."
    )
    limits = {
        "age": f"turns older than {settings.max_age_hours:g} h"
        if settings.max_age_hours > 0
        else "rule off",
        "count": f"more than {settings.max_messages:,} messages",
        "tokens": f"more than {settings.max_tokens:,} tokens"
        if settings.max_tokens
        else "rule off",
    }
    for rule, (messages, turns, conversations) in run.per_rule.items():
        lines.append(
            f"  {rule:<7} {messages:>8,} messages {turns:>6,} turns "
            f"{conversations:>5,} conversation(s)   ({limits[rule]})"
        )
    for item in run.conversations:
        parts = [f"{rule}: {m} messages/{t} turns" for rule, (m, t) in item.reasons.items()]
        if item.summary_deleted:
            parts.append("expired summary")
        lines.append(
            terminal_safe(f"  {item.key.workspace}  {item.key.conversation}: {'; '.join(parts)}")
        )
    return "\n".join(lines)


def search_text(hits: Sequence[SearchHit], has_more: bool) -> str:
    """``search``'s results: where each row is, then its snippet with the matches in ``[[ ]]``
    (control characters shown as ``\\xNN``)."""
    if not hits:
        return "No matches."
    out: list[str] = []
    for hit in hits:
        where = f"{terminal_safe(hit.workspace)}  {terminal_safe(hit.conversation)}"
        out.append(f"{where}  #{hit.id}  turn {hit.turn}  {hit.role}  {when(hit.timestamp)}")
        marked, at = [], 0
        for start, end in hit.highlights:
            marked += [hit.snippet[at:start], "[[", hit.snippet[start:end], "]]"]
            at = end
        marked.append(hit.snippet[at:])
        text = terminal_safe("".join(marked)).replace("\n", "\n    ")
        out.append(f"    {text}")
    if has_more:
        out.append("(more matches: raise --limit, up to 200)")
    return "\n".join(out)
