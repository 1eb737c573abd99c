"""``make bench``, conversation trees (protocol.md "Version 5" → Conversation trees): what the
branches cost beside the same rows stored as a line. Three parts, one run:

- **Storage**: a 100-turn conversation (bench/workload.py's messages: ~400 characters each, a
  tool exchange every fourth turn) in which 20 replies were regenerated (every fifth turn's
  reply: a sibling reply written with ``parentId`` = the turn's prompt, the conversation going
  on from it), ``COPIES`` such conversations in one database; against a database holding the
  same unique rows, in the same order, as plain lines (the same conversations without any
  ``parentId``: each regenerated reply right after the one it replaced). Each database is
  closed, checkpointed (``wal_checkpoint(TRUNCATE)``) and ``VACUUM``-ed; the figure is each
  file's growth over an empty database of the same schema (its size after the same steps),
  tree ÷ line. ``dbstat`` says where the bytes go. Goal: ≤ 1.05×.
- **switchBranch and getTree at 1,000 and 10,000 rows**, a conversation of 100 inactive
  branches at each size: a trunk of half the rows, 99 edited prompts along it (evenly spaced,
  each with a continuation of its own: the other half of the rows) and the trunk's last reply
  regenerated once. ``switchBranch`` (``limit`` 50, as a panel pages) toggles between the two
  last replies (‹ 1/2 ›: one row leaves the active path, one comes on, at either size);
  ``getTree`` reads its default first page (1,000 rows) and a page of 100 from the middle.
  Goal: flat, the 10,000 figure ÷ the 1,000 figure near 1. A switch to an edited prompt's
  branch half-way along and back (a quarter of the rows move each way) is shown beside it.
- **prepare** of the branchy conversation (the trunk active) against the same active path
  stored as a line in the same database (the bodies must be equal). Goal: ≤ 1.2×.

Timed twice: in process through the service layer (``ChatHistoryManager``), and over stdio
against the real server (``python -m chat_history``, one process per size started after the
preload, as bench/systems.py's ``OursStdio``). The sizes (and the tree and the line) are timed
in alternation, call by call, so both see the same moments of the machine; medians in ms.
Writes the "Conversation trees" section of BENCHMARKS.md (``--quick`` and ``--smoke``: print
only; ``--smoke`` is the tiny run tests/unit/test_bench_scripts.py makes, ``--json`` prints its
figures as JSON)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "server"))

MARK = "## Conversation trees"
WORKSPACE = "bench-ws"
#: Retention never caps what is measured; 100 inactive branches are kept (default 50).
SETTINGS: dict[str, Any] = {
    "maxMessages": 1_000_000,
    "maxTokens": 0,
    "maxAgeHours": 0,
    "maxInactiveBranches": 1_000,
    "context": {"maxContextTokens": 4_000},
}
TURNS = 100
REGENERATE_EVERY = 5  # 20 regenerations in 100 turns
BRANCHES = 100
PAGE = 50
FULL = {"copies": 20, "sizes": (1_000, 10_000), "reps": 200, "deep_reps": 20, "budget_s": 6.0}
QUICK = {"copies": 4, "sizes": (1_000, 10_000), "reps": 40, "deep_reps": 6, "budget_s": 2.0}
SMOKE = {"copies": 1, "sizes": (400, 800), "reps": 3, "deep_reps": 2, "budget_s": 0.5}


def settings() -> Any:
    from chat_history.settings import load_settings

    loaded = load_settings(SETTINGS)
    assert not loaded.problems, loaded.problems
    return loaded.settings


def manager_at(folder: Path) -> Any:
    from chat_history.service.manager import ChatHistoryManager
    from chat_history.store import Store

    return ChatHistoryManager(Store(folder), settings())


def turns(prefix: str) -> Iterator[list[Any]]:
    """The workload's messages (bench/workload.py) as whole turns of ``Message``s."""
    from systems import _our_message
    from workload import messages

    turn: list[Any] = []
    for message in messages(prefix):
        if message.role == "user" and turn:
            yield turn
            turn = []
        turn.append(_our_message(message))


def reply(text_of: Any) -> Any:
    from chat_history.model import Message

    return Message(
        role="assistant", content=f"regenerated {text_of.content}"[: len(text_of.content)]
    )


# -- storage ------------------------------------------------------------------------------------


def build_storage(folder: Path, copies: int, *, tree: bool) -> int:
    """``copies`` conversations of ``TURNS`` turns, every ``REGENERATE_EVERY``-th turn's reply
    regenerated: as a tree (the new reply follows the turn's prompt) or as a line (the same
    rows in the same order, no parent named). Returns the rows written."""
    from chat_history.model import Follow, Key
    from chat_history.service import history

    manager = manager_at(folder)
    written = 0
    try:
        for copy in range(copies):
            key = Key(WORKSPACE, f"c{copy}")
            stream = turns(f"c{copy}")
            for number in range(1, TURNS + 1):
                rows = next(stream)
                stored = history.append(manager, key, rows).messages
                written += len(rows)
                if number % REGENERATE_EVERY == 0:
                    follow = Follow(stored[0].id) if tree else None
                    history.append(manager, key, [reply(rows[-1])], follow)
                    written += 1
    finally:
        manager.close()
    return written


def empty_database(folder: Path) -> None:
    from chat_history.model import Key
    from chat_history.service import history

    manager = manager_at(folder)
    try:
        history.get(manager, Key(WORKSPACE, "none"))
    finally:
        manager.close()


def compacted(folder: Path) -> tuple[int, dict[str, int]]:
    """The database file's size after a checkpoint and VACUUM, and its records' bytes per table
    or index (``dbstat``'s payload: what the rows hold, without the pages' free space)."""
    from chat_history.store.engine import connect
    from chat_history.store.schema import DATABASE_FILE

    path = folder / DATABASE_FILE
    connection = connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        by_name = {
            str(name): int(size)
            for name, size in connection.execute(
                "SELECT name, SUM(payload) FROM dbstat GROUP BY name"
            )
        }
    finally:
        connection.close()
    return path.stat().st_size, by_name


def storage(work: Path, copies: int) -> dict[str, Any]:
    sizes: dict[str, int] = {}
    tables: dict[str, dict[str, int]] = {}
    rows: dict[str, int] = {}
    for name in ("empty", "tree", "line"):
        folder = work / f"storage-{name}"
        if name == "empty":
            empty_database(folder)
        else:
            rows[name] = build_storage(folder, copies, tree=name == "tree")
        sizes[name], tables[name] = compacted(folder)
    assert rows["tree"] == rows["line"]
    grown = {name: sizes[name] - sizes["empty"] for name in ("tree", "line")}
    names = sorted(set(tables["tree"]) | set(tables["line"]))
    moved = {
        n: tables["tree"].get(n, 0) - tables["line"].get(n, 0)
        for n in names
        if tables["tree"].get(n, 0) != tables["line"].get(n, 0)
    }
    return {
        "copies": copies,
        "rows": rows["tree"],
        "regenerations": copies * (TURNS // REGENERATE_EVERY),
        "bytes": sizes,
        "ratio": grown["tree"] / grown["line"],
        "file_ratio": sizes["tree"] / sizes["line"],
        "differences": moved,
    }


# -- the branchy conversation -------------------------------------------------------------------


def build_branchy(folder: Path, size: int) -> dict[str, Any]:
    """At ``size`` rows: the trunk (half of them), 99 edited prompts along it each with a
    continuation (the other half), the trunk's last reply regenerated; and the line holding
    the same active path. The ids the bench switches between."""
    from chat_history.model import Follow, Key, Message
    from chat_history.service import branches, history

    manager = manager_at(folder)
    key, line = Key(WORKSPACE, "tree"), Key(WORKSPACE, "line")
    try:
        stream = turns(f"trunk{size}")
        trunk: list[Any] = []
        while True:
            turn = next(stream)
            if len(trunk) + len(turn) > size // 2 and len(turn) == 2:
                break  # the trunk ends on a plain turn (prompt + one reply)
            trunk.extend(turn)
        trunk.extend(turn)
        stored: list[Any] = []
        for start in range(0, len(trunk), 1_000):
            stored.extend(history.append(manager, key, trunk[start : start + 1_000]).messages)
        prompts = [row for row in stored[1:-2] if row.role == "user"]
        edited = [prompts[(i * len(prompts)) // (BRANCHES - 1)] for i in range(BRANCHES - 1)]
        each = max(2, (size - len(trunk)) // (BRANCHES - 1))
        leaves: list[int] = []
        for number, prompt in enumerate(reversed(edited)):  # from the end: each one only parks
            own = turns(f"branch{size}-{number}")
            rows: list[Any] = []
            while len(rows) < each:
                rows.extend(next(own))
            written = history.append(manager, key, rows[:each], Follow(prompt.parent_id)).messages
            leaves.append(written[-1].id)
        branches.switch(manager, key, stored[-1].id)
        regenerated = history.append(manager, key, [reply(trunk[-1])], Follow(stored[-2].id))
        page = branches.tree(manager, key, None, branches.MAX_TREE_PAGE)
        total = len(page.nodes)
        while page.has_more:
            page = branches.tree(manager, key, page.nodes[-1].id, branches.MAX_TREE_PAGE)
            total += len(page.nodes)
        path, _ = history.whole(manager, key)
        plain = [
            Message(
                role=row.role,
                content=row.content,
                tool_calls=row.tool_calls,
                tool_call_id=row.tool_call_id,
                name=row.name,
            )
            for row in path
        ]
        for start in range(0, len(plain), 1_000):
            history.append(manager, line, plain[start : start + 1_000])
        return {
            "rows": total,
            "active": len(path),
            "leaves": (stored[-1].id, regenerated.messages[-1].id),
            "deep": leaves[len(leaves) // 2],
            "middle": (stored[0].id + regenerated.messages[-1].id) // 2,
        }
    finally:
        manager.close()


class InProcess:
    """The service layer on the database of one size."""

    def __init__(self, folder: Path) -> None:
        from chat_history.model import Key
        from chat_history.service.preparation import PrepareOptions

        self.manager = manager_at(folder)
        self.tree_key, self.line_key = Key(WORKSPACE, "tree"), Key(WORKSPACE, "line")
        self.options = PrepareOptions()

    def switch(self, row_id: int) -> int:
        from chat_history.service import branches

        result = branches.switch(self.manager, self.tree_key, row_id, limit=PAGE)
        assert result.active_leaf_id is not None
        return result.active_leaf_id

    def tree(self, after_id: int | None, limit: int | None) -> int:
        from chat_history.service import branches

        return len(branches.tree(self.manager, self.tree_key, after_id, limit).nodes)

    def prepare(self, line: bool) -> dict[str, Any]:
        from chat_history.service import history

        key = self.line_key if line else self.tree_key
        return dict(history.prepare(self.manager, key, self.options).body)

    def close(self) -> None:
        self.manager.close()


class OverStdio:
    """The real server over stdio on the database of one size."""

    def __init__(self, folder: Path) -> None:
        from chat_history.client import StdioClient

        self.client = StdioClient(folder, env={**os.environ})
        self.client.initialize(SETTINGS, workspace=WORKSPACE)

    def switch(self, row_id: int) -> int:
        answer = self.client.call(
            "chatHistory/switchBranch", {"conversationId": "tree", "id": row_id, "limit": PAGE}
        )
        return int(answer["activeLeafId"])

    def tree(self, after_id: int | None, limit: int | None) -> int:
        params: dict[str, Any] = {"conversationId": "tree"}
        if after_id is not None:
            params["afterId"] = after_id
        if limit is not None:
            params["limit"] = limit
        return len(self.client.call("chatHistory/getTree", params)["nodes"])

    def prepare(self, line: bool) -> dict[str, Any]:
        answer = self.client.call(
            "chatHistory/prepare", {"conversationId": "line" if line else "tree"}
        )
        return dict(answer["body"])

    def trivial(self) -> None:
        self.client.call("chatHistory/getSummary", {"conversationId": "none"})

    def close(self) -> None:
        self.client.close()


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def alternate(
    calls: dict[str, Callable[[], object]], reps: int, budget_s: float
) -> dict[str, list[float]]:
    """Each call once per round, round after round (2 untimed rounds first), ``reps`` rounds or
    fewer (at least 3) once ``budget_s`` is spent."""
    for _ in range(2):
        for call in calls.values():
            call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    began = time.perf_counter()
    for round_ in range(reps):
        for name, call in calls.items():
            samples[name].append(timed(call))
        if round_ >= 2 and time.perf_counter() - began > budget_s:
            break
    return samples


def measure(
    sides: dict[int, Any], shapes: dict[int, dict[str, Any]], config: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """Median ms of each operation at each size (``sides``: size → InProcess or OverStdio)."""
    reps, budget = config["reps"], config["budget_s"]
    medians: dict[str, dict[str, float]] = {}

    def toggler(size: int) -> Callable[[], object]:
        first, second = shapes[size]["leaves"]
        state = {"next": first}

        def call() -> None:
            leaf = sides[size].switch(state["next"])
            assert leaf == state["next"], (leaf, state["next"])
            state["next"] = second if leaf == first else first

        return call

    def deep(size: int) -> Callable[[], object]:
        targets = (shapes[size]["deep"], shapes[size]["leaves"][1])
        state = {"at": 0}

        def call() -> None:
            sides[size].switch(targets[state["at"]])
            state["at"] ^= 1

        return call

    operations: dict[str, tuple[Callable[[int], Callable[[], object]], int]] = {
        "switchBranch ‹ 1/2 › (1 row each way)": (toggler, reps),
        "getTree, first page (1,000 rows)": (
            lambda size: lambda: sides[size].tree(None, None),
            reps,
        ),
        "getTree, 100 rows from the middle": (
            lambda size: lambda: sides[size].tree(shapes[size]["middle"], 100),
            reps,
        ),
        "switchBranch half-way and back (a quarter of the rows)": (deep, config["deep_reps"]),
    }
    for name, (make, count) in operations.items():
        samples = alternate({str(size): make(size) for size in sides}, count, budget)
        medians[name] = {size: statistics.median(times) for size, times in samples.items()}
        for size in sides:  # the regenerated reply active: the path the line holds
            sides[size].switch(shapes[size]["leaves"][1])
    for size in sides:
        tree_body, line_body = sides[size].prepare(False), sides[size].prepare(True)
        assert tree_body == line_body, f"prepare at {size}: the tree's body is not the line's"
        samples = alternate(
            {
                "tree": lambda s=size: sides[s].prepare(False),
                "line": lambda s=size: sides[s].prepare(True),
            },
            reps,
            budget,
        )
        medians[f"prepare at {size:,}"] = {k: statistics.median(v) for k, v in samples.items()}
    if isinstance(next(iter(sides.values())), OverStdio):
        samples = alternate({str(s): side.trivial for s, side in sides.items()}, reps, budget)
        medians["trivial request (getSummary)"] = {
            k: statistics.median(v) for k, v in samples.items()
        }
    return medians


# -- the report ---------------------------------------------------------------------------------


def run(config: dict[str, Any], log: Callable[[str], None] = print) -> dict[str, Any]:
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chat-history-trees-") as folder:
        work = Path(folder)
        log("storage ...")
        stored = storage(work, config["copies"])
        shapes: dict[int, dict[str, Any]] = {}
        for size in config["sizes"]:
            log(f"building {size:,} rows ...")
            shapes[size] = build_branchy(work / f"branchy-{size}", size)
        figures: dict[str, Any] = {"storage": stored, "shapes": shapes}
        for how, side in (("in-process", InProcess), ("stdio", OverStdio)):
            log(f"timing {how} ...")
            sides = {size: side(work / f"branchy-{size}") for size in config["sizes"]}
            try:
                figures[how] = measure(sides, shapes, config)
            finally:
                for opened in sides.values():
                    opened.close()
    figures["load"] = os.getloadavg()
    figures["seconds"] = time.perf_counter() - began
    return figures


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def report(figures: dict[str, Any], sizes: Sequence[int]) -> str:
    small, large = (str(s) for s in sizes)
    stored = figures["storage"]
    shapes = figures["shapes"]
    lines = [
        MARK,
        "",
        "`bench/trees.py` (in `make bench`): conversation trees against the same rows stored as "
        "a line. In process through the service layer and over stdio against the real server "
        "(one process per size, started after the preload), the sizes and the tree and the line "
        "timed in alternation, call by call; medians in ms. Load average "
        f"{figures['load'][0]:.1f} / {figures['load'][1]:.1f} / {figures['load'][2]:.1f} "
        f"(1 / 5 / 15 min) on 2 CPUs at the end of the run ({figures['seconds']:.0f} s).",
        "",
        f"**Storage**: {stored['copies']} conversations of {TURNS} turns (the workload's "
        f"~400-character messages, a tool exchange every fourth turn), each with "
        f"{TURNS // REGENERATE_EVERY} replies regenerated (every fifth turn's: a sibling reply "
        "with `parentId` = its prompt, the conversation going on from it): "
        f"{stored['rows']:,} unique rows. The line: the same rows in the same order with no "
        "`parentId` (each regenerated reply after the one it replaced). Each database closed, "
        "`PRAGMA wal_checkpoint(TRUNCATE)`, `VACUUM`; the figure is the file's growth over an "
        "empty database of the same schema after the same steps "
        f"({stored['bytes']['empty']:,} bytes).",
        "",
        "| database | file bytes | growth over empty |",
        "|---|---:|---:|",
    ]
    for name in ("tree", "line"):
        size = stored["bytes"][name]
        lines.append(f"| {name} | {size:,} | {size - stored['bytes']['empty']:,} |")
    lines += [
        "",
        "Where the bytes differ (the records' bytes per table and index, `dbstat`'s payload, "
        "tree − line): "
        + (
            ", ".join(f"`{n}` {d:+,}" for n, d in sorted(stored["differences"].items()))
            or "nowhere"
        )
        + ".",
        "",
        f"**Switches and the tree view** at {int(small):,} and {int(large):,} rows, "
        f"{BRANCHES} inactive branches each: a trunk of half the rows, 99 edited prompts along "
        "it each with a continuation of its own (the other half), the trunk's last reply "
        "regenerated once (rows at each size: "
        + ", ".join(f"{shapes[s]['rows']:,} ({shapes[s]['active']:,} active)" for s in sizes)
        + "). `switchBranch` with `limit` 50 toggles between the two last replies; the "
        "half-way switch goes to an edited prompt's branch in the middle and back, moving a "
        "quarter of the rows each way (shown, not a goal: it moves rows in proportion).",
        "",
        f"| operation | in-process {int(small):,} | in-process {int(large):,} | ratio "
        f"| stdio {int(small):,} | stdio {int(large):,} | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    ops = [op for op in figures["in-process"] if not op.startswith("prepare")]
    for op in [*ops, "trivial request (getSummary)"]:
        cells = []
        for how in ("in-process", "stdio"):
            found = figures[how].get(op)
            if found is None:
                cells += ["—", "—", "—"]
                continue
            cells += [_ms(found[small]), _ms(found[large]), f"{found[large] / found[small]:.2f}×"]
        lines.append(f"| {op} | {' | '.join(cells)} |")
    lines += [
        "",
        "**prepare** (default route, 4,000-token budget) of the branchy conversation, the trunk "
        "active, against the same active path stored as a line in the same database; the two "
        "bodies are equal (checked).",
        "",
        "| rows | in-process tree | line | ratio | stdio tree | line | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        cells = []
        for how in ("in-process", "stdio"):
            found = figures[how][f"prepare at {size:,}"]
            cells += [
                _ms(found["tree"]),
                _ms(found["line"]),
                f"{found['tree'] / found['line']:.2f}×",
            ]
        lines.append(f"| {size:,} | {' | '.join(cells)} |")
    lines += ["", *targets(figures, sizes), "", *WHERE, ""]
    return "\n".join(lines)


#: What a profile found (cProfile of 40 toggles and 20 first pages at 10,000 rows, in process;
#: load ~8 on 2 CPUs), and why the switches and the tree view are not flat.
WHERE = [
    "Where the time goes (cProfile in process at 10,000 rows, load ~1.5):",
    "",
    "- **switchBranch** reads the branch it moves, never the other parked rows: the target's "
    "ancestors by primary key up to its branch's head and that branch's subtree by "
    "`messages_by_parent` (`store.tree_reads.branch_nodes`, recursive SQL on both engines), "
    "the path below the target picked among those rows (`tree_steps.parked_switch`), and the "
    "`branches` rows follow from the rows that moved (`policy.tree.after_switch`: the rows "
    "that left become one branch with those below them, the arriving branch splits into the "
    "subtrees off its path; only the `branches` rows that differ are written). The one-row "
    "toggle's time is now the request's fixed part: the page of the newest 50 rows it answers "
    "(`_path_page`, ~40 %) and three reads of the conversation's `branches` rows (the stamp, "
    "the update and the siblings, ~25 %: one per inactive branch, not per row). The half-way "
    "switch still moves a quarter of the rows: reading that branch (~18 %), the path below "
    "the target (~12 %), the rows' `UPDATE`s (~20 %) and the turn figures of the rows that "
    "came (`record_completed_turns`, ~17 %), in proportion to what it moves.",
    "- **getTree** reads its page only: the next ids of the active path and of the parked rows "
    "by `messages_by_conversation` (at most a page of each), then the page's rows up to the "
    "last id it keeps, and its rows' parked children counted by `messages_by_parent` "
    "(`store.tree_reads.parked_children`, one range of the index: <1 % of a first page, ~8 % of a "
    "page of 100). What is left is a Python object per row (a `Node`, then a `TreeNode`: ~30 "
    "%) and the page's read (~60 %), both in proportion to the page.",
    "- **prepare** reads the active path only (the parked rows are under another key), so the "
    "tree costs what the line does (a stdio figure above 1× moves with the machine's load: an "
    "earlier run at load 8.5 gave 1.32× over stdio and 0.98× in process at 10,000).",
    "- **Storage**: a parked row's `conversation` value carries the 9-byte parked suffix in the "
    "row and in the indexes keyed by it, every row stores `parent_id` (and "
    "`messages_by_parent` indexes it, in the line's database too), and each inactive branch "
    "has a `branches` row; no row is stored twice.",
]


def targets(figures: dict[str, Any], sizes: Sequence[int]) -> list[str]:
    small, large = (str(s) for s in sizes)

    def flat(how: str, op: str) -> float:
        found = figures[how][op]
        return float(found[large] / found[small])

    def worst_prepare(how: str) -> float:
        return max(
            figures[how][f"prepare at {s:,}"]["tree"] / figures[how][f"prepare at {s:,}"]["line"]
            for s in sizes
        )

    def row(goal: str, measured: float, limit: float) -> str:
        verdict = "met" if measured <= limit else "**missed**"
        return f"| {goal} | {measured:.2f}× | {verdict} |"

    switch = "switchBranch ‹ 1/2 › (1 row each way)"
    first = "getTree, first page (1,000 rows)"
    middle = "getTree, 100 rows from the middle"
    rows = ["| target | measured | |", "|---|---:|---|"]
    rows.append(
        row("storage, tree ÷ the same rows as lines ≤ 1.05×", figures["storage"]["ratio"], 1.05)
    )
    for how in ("in-process", "stdio"):
        for op, label in (
            (switch, "switchBranch"),
            (first, "getTree, first page"),
            (middle, "getTree, middle page"),
        ):
            rows.append(
                row(
                    f"{label} at {int(large):,} ÷ at {int(small):,}, {how} (flat: ≤ 1.2×)",
                    flat(how, op),
                    1.2,
                )
            )
        rows.append(row(f"prepare, tree ÷ line, {how}, worst size ≤ 1.2×", worst_prepare(how), 1.2))
    return rows


def write_section(text: str, out: Path) -> None:
    current = out.read_text(encoding="utf-8") if out.exists() else ""
    head, found, rest = current.partition(MARK)
    if not found:
        out.write_text(current.rstrip("\n") + "\n\n" + text, encoding="utf-8")
        return
    tail = rest.split("\n## ", 1)[1] if "\n## " in rest else ""
    out.write_text(head + text + (f"\n## {tail}" if tail else ""), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer copies and calls, print only")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, print only (the test)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args()
    config = SMOKE if args.smoke else QUICK if args.quick else FULL
    figures = run(config, log=lambda line: print(line, file=sys.stderr, flush=True))
    text = report(figures, config["sizes"])
    print(text)
    if args.json:
        print(json.dumps(figures, default=str))
    if not (args.quick or args.smoke):
        write_section(text, args.out)


if __name__ == "__main__":
    main()
