"""``make bench``: the provider state replay (issue 42; protocol.md "Version 5" → Provider state
that stays valid). Recorded-shape sessions — Anthropic thinking in tool loops, Responses
reasoning with native compaction, Gemini 3 thought signatures on parallel calls, imported
Claude Code, Codex and OpenCode sessions (the test fixtures, their state minted again at the
import's origin), and conversations that move between providers — each put through every
operation: a tight budget (trimmed turns, collapsed tool exchanges), a summary, a native
compaction, an edit, a fork, an export imported again, a model switch, a provider switch, a
scope (or endpoint) switch, and a refusal injected at its own target (a revoked signature; a
Gemini 3 the server cannot name). After each, ``prepare`` and ``format`` for the targets the
operation concerns, every body judged by the simulated providers (tests/unit/state_oracle.py,
which reads the minting facts inside each piece of state), checked with the providers' SDK types
and structural rules (tests/unit/test_providers_sdk.py, provider_rules.py).

Targets: no body carries state its target refuses; at least 95 % of the state the target takes
(of the rows a body sends) is in it; every injected refusal is recovered by one
``reportProviderError`` and one ``prepare``. A control runs a quarter of the sessions under
version 4's rule (state to any target of its kind: the fence taken out), so the figures show
that the simulated providers do refuse what the fence keeps out. Writes the "Provider state
replay" section of BENCHMARKS.md (``--quick`` or ``--sessions N``: prints only)."""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import attrs

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "tests" / "unit"))

import state_oracle as oracle  # noqa: E402
from anthropic.types.beta import message_create_params as beta_params  # noqa: E402
from provider_rules import violations  # noqa: E402
from pydantic import AfterValidator, TypeAdapter  # noqa: E402
from state_replay import Clock, History, Outcome  # noqa: E402
from test_providers_sdk import _typed_dict_check, materialize, sdk_problems  # noqa: E402

from chat_history.importers.common import Session  # noqa: E402
from chat_history.model import Key  # noqa: E402
from chat_history.service import import_writes, imports  # noqa: E402
from chat_history.service.manager import ChatHistoryManager  # noqa: E402
from chat_history.store import Store  # noqa: E402

MARK = "## Provider state replay"
FIXTURES = ROOT / "tests" / "fixtures" / "imports"
SHAPES = ("anthropic-loop", "responses-compaction", "gemini3", "imported", "mixed")
#: Each shape's own target, and the targets of its switches: (model, provider, scope).
HOME = {
    "anthropic-loop": ("gw-sonnet", ("sonnet", "opus"), ("gpt",), ("gw-sonnet-b", "sonnet")),
    "responses-compaction": ("gpt", ("gpt-mini",), ("sonnet",), ("gpt-org2",)),
    "gemini3": ("gem3", ("gem3-flash", "gem25"), ("gpt",), ("gem-tuned",)),
    "mixed": ("sonnet", ("opus",), ("gem3", "deepseek"), ("gw-sonnet",)),
}
IMPORTED = {
    "claude-code": ("claude-import", ("opus",), ("gpt",), ("sonnet",)),
    "codex": ("codex-import", ("gpt-mini",), ("sonnet",), ("gpt",)),
    "opencode": ("opencode-import", ("opus",), ("gem3",), ("sonnet",)),
}
OPERATIONS = (
    "trim",
    "summary",
    "compaction",
    "edit",
    "fork",
    "import",
    "model switch",
    "provider switch",
    "scope switch",
    "injected refusal",
)
BETA_ANTHROPIC = TypeAdapter(
    Annotated[beta_params.MessageCreateParamsNonStreaming, AfterValidator(materialize)]
)


def body_problems(kind: str, body: dict[str, Any]) -> list[str]:
    """What the SDK types and the structural rules say of ``body``. A native compaction is
    checked with the types that know it (Anthropic's beta ones), and the structural rules,
    written before compaction, read the rest of the body."""
    if kind == "anthropic" and any(
        block.get("type") == "compaction"
        for message in body["messages"][:1]
        for block in message["content"]
    ):
        request = {"model": "claude-test", "max_tokens": 64, **body}
        rest = {**body, "messages": body["messages"][1:]}
        return _typed_dict_check(BETA_ANTHROPIC, request, set()) + violations(kind, rest)
    if kind == "openai-responses":
        rest = {**body, "input": [i for i in body["input"] if i.get("type") != "compaction"]}
        return sdk_problems(kind, body) + violations(kind, rest)
    return sdk_problems(kind, body) + violations(kind, body)


def fixture_sessions() -> list[tuple[str, Session]]:
    """Every fixture session of the importers whose tool's provider the readers know."""
    found: list[tuple[str, Session]] = []
    folders = {
        "claude-code": FIXTURES / "claude-code" / "-home-me-shop",
        "codex": FIXTURES / "codex",
        "opencode": FIXTURES / "opencode" / "storage",
    }
    for source, folder in folders.items():
        for _, session in imports.sessions_of(source, folder, None):
            found.append((source, session))
    return found


@attrs.frozen
class Plan:
    """A session's own target and those of its switches (model, provider, scope)."""

    home: str
    model: tuple[str, ...]
    provider: tuple[str, ...]
    scope: tuple[str, ...]


def build(
    shape: str,
    index: int,
    run: History,
    rng: random.Random,
    fixtures: list[tuple[str, Session]],
) -> Plan:
    """The session of ``shape`` in ``run`` (an import: fixture ``index``, its state minted again
    at its origin, continued at the import's scope); its plan."""
    if shape == "imported":
        source, session = fixtures[index % len(fixtures)]
        rows = [oracle.reminted(run.registry, m, run._marker()) for m in session.messages]
        import_writes.import_conversation(run.manager, run.key, rows)
        plan = Plan(*IMPORTED[source])
        run.turn(plan.home, rng.randint(0, 2), rng.randint(1, 2))
        return plan
    plan = Plan(*HOME[shape])
    for turn in range(rng.randint(3, 6)):
        if shape == "mixed":
            target = ("sonnet", "gpt", "gem3", "deepseek", "opus")[turn % 5]
        else:
            target = plan.home
        steps = rng.randint(1, 3) if shape != "responses-compaction" else rng.randint(0, 2)
        calls = rng.randint(2, 3) if shape == "gemini3" else rng.randint(1, 2)
        run.turn(target, steps, calls)
    return plan


def operate(operation: str, run: History, shape: str, plan: Plan) -> list[tuple[str, str]]:
    """Apply ``operation`` to ``run``; the (target, mode) checks it calls for."""
    home = plan.home
    if operation == "trim":
        return [(home, "tight")]
    if operation == "summary":
        run.summary(0.5)
        return [(home, "roomy"), (home, "tight")]
    if operation == "compaction":
        run.compaction(home, 0.5)
        return [(home, "roomy"), (plan.model[0], "roomy"), (plan.scope[0], "roomy")]
    if operation == "edit":
        run.edit(0.6)
        return [(home, "roomy")]
    if operation == "fork":
        run.fork()
        run.turn(home, 1, 1)
        return [(home, "roomy"), (home, "tight")]
    if operation == "import":
        run.import_()
        return [(home, "roomy")]
    if operation == "model switch":
        return [(t, "roomy") for t in plan.model]
    if operation == "provider switch":
        return [(t, "roomy") for t in plan.provider]
    if operation == "scope switch":
        return [(t, "roomy") for t in plan.scope]
    if operation == "injected refusal":
        run.revoke(home)
        checks = [(home, "roomy")]
        if shape == "gemini3":
            checks.append(("gem-tuned", "roomy"))
        return checks
    raise ValueError(operation)


def replay(sessions: int, seed: int = 42, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run ``sessions`` sessions through every operation; the figures."""
    fixtures = fixture_sessions()
    rng = random.Random(seed)
    total = Outcome()
    operations = 0
    by_shape: dict[str, int] = dict.fromkeys(SHAPES, 0)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        clock = Clock()
        manager = ChatHistoryManager(Store(Path(folder)), oracle.settings(), clock=clock)
        try:
            for number in range(sessions):
                shape = SHAPES[number % len(SHAPES)]
                run = History(manager, clock, key=Key("ws", f"{shape}-{number}"))
                plan = build(shape, number, run, rng, fixtures)
                by_shape[shape] += 1
                checks = [(plan.home, "roomy")]
                for operation in OPERATIONS:
                    for target, mode in checks:
                        total.add(run.check(target, mode, body_problems))
                    checks = operate(operation, run, shape, plan)
                    operations += 1
                for target, mode in checks:
                    total.add(run.check(target, mode, body_problems))
                if (number + 1) % 25 == 0:
                    log(f"{number + 1} sessions, {total.bodies} bodies")
        finally:
            manager.close()
    return {
        "sessions": sessions,
        "shapes": by_shape,
        "operations": operations,
        "bodies": total.bodies,
        "refused": total.refused,
        "valid": total.valid,
        "kept": total.kept,
        "kept_share": total.kept / total.valid if total.valid else 1.0,
        "injected": total.injected,
        "recovered": total.recovered,
        "sdk": total.sdk,
        "seconds": time.perf_counter() - began,
    }


def control(sessions: int) -> dict[str, Any]:
    """The replay under version 4's rule: every row's state to any target of its kind."""
    from chat_history.providers import registry

    fence = registry.state_rules.fence
    registry.state_rules.fence = lambda rows, target, **_: list(rows)  # type: ignore[assignment]
    try:
        return replay(sessions, log=lambda _: None)
    finally:
        registry.state_rules.fence = fence


def report(figures: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    shapes = ", ".join(f"{name} {count}" for name, count in figures["shapes"].items())
    return "\n".join(
        [
            MARK,
            "",
            "`bench/replay.py`: recorded-shape sessions, each through every operation of "
            "version 5's fence (a tight budget, a summary, a native compaction, an edit, a "
            "fork, an export imported again, a model, provider and scope switch, an injected "
            "refusal), "
            "`prepare` and `format` after each for the targets it concerns, every body judged by "
            "the simulated providers (tests/unit/state_oracle.py) and checked with the SDK types "
            "and structural rules. Targets: 0 bodies with refused state, ≥ 95 % of the state "
            "that stays valid kept, every injected refusal recovered by one report and one "
            "prepare.",
            "",
            "| sessions | operations | bodies | refused state | valid state kept "
            "| injected refusals recovered | SDK/rule problems | seconds |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {figures['sessions']} ({shapes}) | {figures['operations']:,} | "
            f"{figures['bodies']:,} | {len(figures['refused'])} | "
            f"{figures['kept']:,} / {figures['valid']:,} ({100 * figures['kept_share']:.1f} %) | "
            f"{figures['recovered']} / {figures['injected']} | {len(figures['sdk'])} | "
            f"{figures['seconds']:.0f} |",
            "",
            *(
                [
                    f"Control, version 4's rule (state to any target of its kind) on "
                    f"{before['sessions']} of the sessions: {len(before['refused']):,} of "
                    f"{before['bodies']:,} bodies carry state their target refuses, and "
                    f"{before['injected'] - before['recovered']} of {before['injected']} "
                    "injected refusals stay unrecovered (it sends fenced state all the same).",
                    "",
                ]
                if before is not None
                else []
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=200, help="sessions (default 200)")
    parser.add_argument("--quick", action="store_true", help="20 sessions, print only")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args()
    sessions = 20 if args.quick else args.sessions
    figures = replay(sessions)
    text = report(figures, None if args.quick else control(max(5, sessions // 4)))
    print(text)
    for line in [*figures["refused"][:10], *figures["sdk"][:10]]:
        print("  ", line)
    print(json.dumps({k: v for k, v in figures.items() if k not in ("refused", "sdk")}))
    if not args.quick and sessions >= 200:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        head, _, rest = current.partition(MARK)
        tail = rest.split("\n## ", 1)[1] if "\n## " in rest else ""
        kept = head.rstrip("\n") + "\n\n" + text + (f"\n## {tail}" if tail else "")
        args.out.write_text(kept, encoding="utf-8")
    ok = (
        not figures["refused"]
        and not figures["sdk"]
        and figures["kept_share"] >= 0.95
        and figures["recovered"] == figures["injected"]
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
