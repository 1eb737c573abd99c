"""Histories and the operations of version 5's fence, driven through the service on a real
store, and the check of every body against the simulated providers (``state_oracle``): what
the property test (test_state_fence_properties.py) runs on random sequences and bench/replay.py
on recorded-shape sessions. An operation is a method of ``History``; ``check`` prepares (and
formats) for a target under a settings mode and judges the body; a refusal the simulation
injected (a revocation, a Gemini 3 the server cannot name) is reported once, and the next
prepare must be taken.

A branch switch (version 5's trees) is an operation of the same kind: ``regenerate`` (a reply
minted again at a turn's prompt, by any target, beside the one it replaces) and
``switch_branch`` (the active path moved to a sibling of one of its rows)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import state_oracle as oracle

from chat_history.cli import transfer
from chat_history.model import Follow, Key, Message, StoredMessage, ToolCall
from chat_history.providers.state_rules import BY_NAME, Target, fenced, rules_of
from chat_history.service import (
    branches,
    conversations,
    edits,
    history,
    import_writes,
    provider_state,
)
from chat_history.service.edits import MessageEdit
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.preparation import PrepareOptions

#: How each check reads the history: the whole of it fits, or turns are trimmed and old tool
#: exchanges collapsed (prepare's steps 3-6), or the whole history as ``format`` sends it.
MODES: dict[str, dict[str, Any]] = {
    "roomy": {},
    "tight": {"context": {"maxHistoryTurns": 2, "keepToolContextTurns": 0}},
}
OPERATIONS = (
    "turn",
    "summary",
    "compaction",
    "edit",
    "fork",
    "import",
    "delete_turn",
    "truncate",
    "revoke",
    "regenerate",
    "switch_branch",
)


class Clock:
    """Epoch milliseconds that move one second a step (rows, summaries and compactions are
    ordered in time, as the prefix rule reads them)."""

    def __init__(self, start: int = 1_764_480_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def tick(self) -> int:
        self.now += 1_000
        return self.now


@attrs.define
class Outcome:
    """What checks found: bodies judged, refusals of state that should never have been sent,
    refusals injected and those recovered by one report and one prepare, the state the bodies
    had to carry and what they did, and the SDK's complaints."""

    bodies: int = 0
    refused: list[str] = attrs.field(factory=list)
    injected: int = 0
    recovered: int = 0
    valid: int = 0
    kept: int = 0
    sdk: list[str] = attrs.field(factory=list)

    def add(self, other: Outcome) -> None:
        self.bodies += other.bodies
        self.refused += other.refused
        self.injected += other.injected
        self.recovered += other.recovered
        self.valid += other.valid
        self.kept += other.kept
        self.sdk += other.sdk


BodyCheck = Callable[[str, dict[str, Any]], list[str]]


@attrs.define
class History:
    """One conversation (and what forks and imports make of it) on a manager, with the state
    minted in it."""

    manager: ChatHistoryManager
    clock: Clock
    registry: oracle.Registry = attrs.field(factory=oracle.Registry)
    key: Key = attrs.field(factory=lambda: Key("ws", "h0"))
    standing: dict[Key, oracle.Standing] = attrs.field(factory=dict)
    made: int = 0

    def _marker(self) -> str:
        self.made += 1
        return f"[[r{self.made}]]"

    def rows(self) -> list[StoredMessage]:
        return list(history.get(self.manager, self.key).messages)

    def _here(self) -> oracle.Standing:
        return self.standing.setdefault(self.key, oracle.Standing())

    def _pick(self, fraction: float, rows: list[StoredMessage]) -> StoredMessage | None:
        return rows[min(len(rows) - 1, int(fraction * len(rows)))] if rows else None

    # -- operations ------------------------------------------------------------------------

    def turn(self, target: str, steps: int = 0, calls: int = 1) -> None:
        """A prompt and ``target``'s answer: ``steps`` tool-loop steps of ``calls`` calls each
        (every call answered), then a closing reply."""
        prompt = Message(
            role="user", content=f"please {self._marker()}", timestamp=self.clock.tick()
        )
        history.append(self.manager, self.key, [prompt, *self._answer(target, steps, calls)])

    def _answer(self, target: str, steps: int, calls: int) -> list[Message]:
        """``target``'s answer to a prompt: ``steps`` tool-loop steps of ``calls`` calls each
        (every call answered), then a closing reply."""
        rows: list[Message] = []
        for step in range(steps):
            made = [
                ToolCall(id=f"c{self.made}x{step}x{n}", name="read_file", arguments={"n": n})
                for n in range(max(1, calls))
            ]
            marker = self._marker()
            rows.append(
                oracle.reply(self.registry, target, marker, "calling", made, self.clock.tick())
            )
            rows.extend(
                Message(
                    role="tool",
                    content=f"result of {call.id}",
                    tool_call_id=call.id,
                    name=call.name,
                    timestamp=self.clock.tick(),
                )
                for call in made
            )
        marker = self._marker()
        rows.append(oracle.reply(self.registry, target, marker, "done", (), self.clock.tick()))
        return rows

    def summary(self, fraction: float) -> None:
        """A summary (the client's, from a compaction proposal) covering the rows up to a point."""
        row = self._pick(fraction, self.rows())
        if row is None:
            return
        self.clock.tick()
        saved = history.save_summary(self.manager, self.key, "what happened so far", row.id)
        self._here().summary_at = saved.updated_at

    def compaction(self, target: str, fraction: float) -> None:
        """``target``'s own compaction of the rows up to a point (a kind with one)."""
        row = self._pick(fraction, self.rows())
        if row is None or oracle.kind_of(target) not in ("openai-responses", "anthropic"):
            return
        self.clock.tick()
        items = oracle.compaction_items(self.registry, target, f"cmp{self.made}", self.clock.now)
        origin = oracle.alias_origin(target, oracle.aliases(), "origin")
        saved = provider_state.save_compaction(self.manager, self.key, row.id, items, origin)
        self._here().compaction_at = saved.saved_at

    def edit(self, fraction: float) -> None:
        """A typo fixed in a row's text (its marker kept)."""
        row = self._pick(fraction, [r for r in self.rows() if r.role in ("user", "assistant")])
        if row is not None:
            edits.edit_message(
                self.manager, self.key, row.id, MessageEdit(content=row.content + " (fixed)")
            )

    def fork(self) -> None:
        """The conversation copied, and continued in the copy."""
        if not self.rows():
            return
        target = Key(self.key.workspace, f"{self.key.conversation}f")
        conversations.fork(self.manager, self.key, target)
        self.standing[target] = attrs.evolve(self._here())
        self.key = target

    def import_(self) -> None:
        """The conversation exported and imported again under another id (the CLI's round
        trip), and continued there."""
        rows, summary = history.whole(self.manager, self.key)
        if not rows:
            return
        lines = [transfer.header_line(), *transfer.conversation_lines(self.key, rows, summary)]
        [read] = transfer.read_import(transfer.dumps(line).encode() for line in lines)
        target = Key(self.key.workspace, f"{self.key.conversation}i")
        import_writes.import_conversation(self.manager, target, read.messages, read.summary)
        standing = oracle.Standing(summary_at=summary.updated_at if summary else None)
        self.standing[target] = standing
        self.key = target

    def delete_turn(self, fraction: float) -> None:
        row = self._pick(fraction, self.rows())
        if row is not None and row.turn > 0:
            edits.delete_turns(self.manager, self.key, [row.turn])

    def truncate(self, fraction: float) -> None:
        """Everything from a turn's prompt on deleted (a rewind)."""
        prompts = [r for r in self.rows() if r.role == "user"]
        row = self._pick(fraction, prompts)
        if row is not None and len(prompts) > 1:
            edits.truncate(self.manager, self.key, row.id)

    def regenerate(self, target: str, fraction: float, steps: int = 0, calls: int = 1) -> None:
        """A turn's reply regenerated (``beginReply``'s ``parentId`` = its prompt, here an
        ``append`` after it) by ``target``, maybe another model or provider than the one that
        answered: the rows after the prompt leave the active path, kept as a branch, and the
        new answer is the active leaf."""
        prompt = self._pick(fraction, [r for r in self.rows() if r.role == "user"])
        if prompt is not None:
            rows = self._answer(target, steps, calls)
            history.append(self.manager, self.key, rows, Follow(prompt.id))

    def switch_branch(self, fraction: float) -> None:
        """``switchBranch`` from a row of the active path that has siblings to the next of them
        (‹ 1/2 › → 2/2; twice: back and forth)."""
        rows = [r for r in self.rows() if r.siblings is not None and r.siblings.count > 1]
        row = self._pick(fraction, rows)
        if row is not None and row.siblings is not None:
            ids = row.siblings.ids
            branches.switch(self.manager, self.key, ids[(row.siblings.index + 1) % len(ids)])

    def revoke(self, target: str) -> None:
        """``target`` refuses every state it took so far (a key rotated, a signature expired)."""
        self.registry.revoke(target)

    # -- checking --------------------------------------------------------------------------

    def fenced_uids(self, target: str) -> set[str]:
        """The state a report fenced from ``target``: the server no longer sends it there."""
        to = Target.of(_route(target))
        found: set[str] = set()
        for row in self.rows():
            for rule in rules_of(to.kind):
                if row.fences and fenced(rule, row.fences, to):
                    data = row.provider_data.get(to.kind)
                    found |= {facts["u"] for facts in oracle.tokens_in({"d": data})}
        return found

    def check(self, target: str, mode: str, body_check: BodyCheck | None = None) -> Outcome:
        """``prepare`` for ``target`` under ``mode`` judged by the simulated provider, and
        ``format`` after it: an injected refusal of either reported once, then one new body.
        (``format`` sends state ``prepare`` may leave out, such as what a summary stands in
        for: a revocation can show there first, as it would to a client that formats.)"""
        outcome = Outcome()
        manager = self.manager.under(oracle.settings(**MODES[mode]))
        standing = self._here()
        bodies = {
            "prepare": lambda: _prepared(manager, self.key, target),
            "format": lambda: _json(history.format(manager, self.key, target).body),
        }
        for what, make in bodies.items():
            judged = make()
            refused = oracle.refusal(target, judged, self.registry, standing)
            if refused is not None and refused.injected:
                outcome.injected += 1
                answer = provider_state.report_error(
                    manager, self.key, target, None, refused.status, refused.body
                )
                judged = make()
                again = oracle.refusal(target, judged, self.registry, standing)
                if again is None and answer.reason is not None:
                    outcome.recovered += 1
                refused = again
            outcome.bodies += 1
            if refused is not None:
                outcome.refused.append(f"{target}/{mode}/{what}: {refused.why}")
            if body_check is not None:
                outcome.sdk += [
                    f"{target}/{what}: {p}" for p in body_check(oracle.kind_of(target), judged)
                ]
            if what == "prepare":
                body = judged
        fenced_now = self.fenced_uids(target)
        valid = oracle.valid_uids(target, body, self.registry, standing, fenced_now)
        present = {facts["u"] for facts in oracle.tokens_in(body)}
        outcome.valid += len(valid)
        outcome.kept += len(valid & present)
        return outcome


def _route(target: str) -> Any:
    from chat_history.policy.budget import resolve_route

    return resolve_route(target, None, oracle.settings())


def _prepared(manager: ChatHistoryManager, key: Key, target: str) -> dict[str, Any]:
    return _json(history.prepare(manager, key, PrepareOptions(provider=target)).body)


def _json(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a provider reads it (through JSON)."""
    loaded: dict[str, Any] = json.loads(json.dumps(body))
    return loaded


def state_names() -> list[str]:
    """Every rule's name (what a report can fence)."""
    return sorted(BY_NAME)
