"""Issue 14 storage spike, figures only (``.venv/bin/python bench/fts_spike.py``): what the chosen
search index (tests/unit/test_fts_residue.py: contentless FTS5 trigram over folded text, kept by
triggers, FTS5 secure-delete, on sqlean.py's SQLite) costs per append and in database size, and
how search at 1,000 and 100,000 rows compares with a ``LIKE '%word%'`` scan. Prints; asserts
nothing. Pragmas as the store sets them (WAL, synchronous NORMAL, secure_delete)."""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlean

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from test_fts_residue import CATCH_UP, LAZY_INDEX, MESSAGES, with_detail  # noqa: E402

from chat_history.policy.search.folding import stored_fold  # noqa: E402
from chat_history.policy.search.fts import fts_plan  # noqa: E402
from chat_history.policy.search.query import parse_query  # noqa: E402
from chat_history.policy.search.scoring import relevance  # noqa: E402
from chat_history.policy.search.snippets import match_row  # noqa: E402

ACCENTED = ["café", "résumé", "naïve", "Straße", "東京都", "日本語の文章", "über"]
RARE = "zephyrquill"  # planted in exactly 20 rows at every size


def corpus() -> list[str]:
    """Natural text with code in it, like a coding chat: the standard library's own sources."""
    texts = []
    for file in sorted(Path(os.__file__).parent.glob("*.py")):
        texts.append(file.read_text(encoding="utf-8", errors="replace"))
    return texts


SOURCE = "\n".join(corpus())


def message(rng: random.Random) -> str:
    length = rng.choice([40, 120, 300, 600, 1500])
    start = rng.randrange(len(SOURCE) - length)
    text = SOURCE[start : start + length]
    if rng.random() < 0.1:
        text += " " + rng.choice(ACCENTED)
    return text


def connect(path: Path, index: list[str] | None) -> Any:
    connection = sqlean.connect(str(path), isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "secure_delete = ON"):
        connection.execute(f"PRAGMA {pragma}")
    connection.execute(MESSAGES)
    for statement in index or []:
        connection.execute(statement)
    return connection


def fill(connection: Any, rows: int, rng: random.Random) -> None:
    rare = set(rng.sample(range(rows), 20))
    batch = []
    for i in range(rows):
        text = message(rng) + (f" {RARE}" if i in rare else "")
        batch.append((f"c{i % 100}", text, stored_fold(text)))
    connection.execute("BEGIN")
    connection.executemany(
        "INSERT INTO messages(conversation, content, folded) VALUES (?, ?, ?)", batch
    )
    connection.execute("COMMIT")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def median_time(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def search(connection: Any, query: str, positions: bool, limit: int = 50) -> int:
    """The whole pipeline: index candidates, the cheap relevance pass, relevance then recency,
    snippets for the first ``limit``. Returns how many rows matched."""
    parsed = parse_query(query)
    expression = fts_plan(parsed, positions=positions).expression
    rows = connection.execute(
        "SELECT m.id, m.content FROM search JOIN messages m ON m.id = search.rowid "
        "WHERE search MATCH ?",
        (expression,),
    )
    ranked = []
    for row_id, content in rows:
        score = relevance(content, parsed)
        if score is not None:
            ranked.append((-score, -row_id, content))
    ranked.sort(key=lambda item: item[:2])
    for _, _, content in ranked[:limit]:
        match_row(content, parsed)
    return len(ranked)


def like(connection: Any, word: str) -> list[Any]:
    sql = "SELECT id, content FROM messages WHERE content LIKE ? ORDER BY id DESC LIMIT 50"
    return list(connection.execute(sql, (f"%{word}%",)))


def size(path: Path) -> int:
    return sum(
        os.path.getsize(f"{path}{suffix}")
        for suffix in ("", "-wal")
        if os.path.exists(f"{path}{suffix}")
    )


VARIANTS: dict[str, list[str] | None] = {
    "no index": None,
    "detail=full": with_detail("full"),
    "detail=none": with_detail("none"),
    "lazy (none)": LAZY_INDEX,
}
QUERIES = {
    "rare word": RARE,
    "rare+common": f"{RARE} self",
    "two words": "import sys",
    "accented": "cafe",
    "common": "return",
    "phrase": '"def __init__(self"',
}


def appends(folder: str) -> None:
    """One transaction per row, as the store appends, on a 1,000-row database."""
    for name, index in VARIANTS.items():
        path = Path(folder) / f"append-{name}.sqlite3"
        connection = connect(path, index)
        rng = random.Random(1)
        fill(connection, 1_000, rng)
        if index is LAZY_INDEX:
            catch_up(connection)
        texts = [message(rng) for _ in range(2_000)]
        start = time.perf_counter()
        for text in texts:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "INSERT INTO messages(conversation, content, folded) VALUES ('a', ?, ?)",
                (text, stored_fold(text)),
            )
            connection.execute("COMMIT")
        per = (time.perf_counter() - start) / len(texts)
        print(f"append, {name:12}: {per * 1e6:6.0f} µs/row")
        if index is LAZY_INDEX:
            start = time.perf_counter()
            catch_up(connection)
            per = (time.perf_counter() - start) / len(texts)
            print(f"  lazy catch-up of those rows in one transaction: {per * 1e6:6.0f} µs/row")
        connection.close()


def catch_up(connection: Any) -> None:
    connection.execute("BEGIN IMMEDIATE")
    for statement in CATCH_UP:
        connection.execute(statement)
    connection.execute("COMMIT")


def searches(folder: str) -> None:
    figures: dict[tuple[str, int, str], float] = {}
    for rows in (1_000, 100_000):
        sizes = {}
        for name, index in VARIANTS.items():
            path = Path(folder) / f"size-{rows}-{name}.sqlite3"
            connection = connect(path, index)
            fill(connection, rows, random.Random(2))
            if index is LAZY_INDEX:
                catch_up(connection)
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            sizes[name] = size(path)
            if index is None:
                figures[(name, rows, "LIKE rare")] = median_time(
                    lambda c=connection: like(c, RARE), 3
                )
            else:
                positions = name == "detail=full"
                if index is LAZY_INDEX:
                    connection.close()
                    continue  # searches as detail=none once caught up
                for label, query in QUERIES.items():
                    hits = search(connection, query, positions)
                    figures[(name, rows, label)] = median_time(
                        lambda c=connection, q=query, p=positions: search(c, q, p), 3
                    )
                    if positions:
                        print(f"{rows:7} rows: {label:11} {query!r} matches {hits} rows")
                start = time.perf_counter()
                connection.execute("BEGIN IMMEDIATE")
                connection.execute(
                    "DELETE FROM messages WHERE id > (SELECT max(id) - 100 FROM messages)"
                )
                connection.execute("COMMIT")
                figures[(name, rows, "delete 100 rows")] = time.perf_counter() - start
                start = time.perf_counter()
                connection.execute("INSERT INTO search(search) VALUES ('optimize')")
                figures[(name, rows, "optimize")] = time.perf_counter() - start
            connection.close()
        base = sizes["no index"]
        for name, total in sizes.items():
            print(f"{rows:7} rows, {name:12}: {total / 1e6:7.1f} MB ({total / base:.2f}x)")
    for key in sorted({(name, label) for name, _, label in figures}):
        small, large = figures[(*key[:1], 1_000, key[1])], figures[(key[0], 100_000, key[1])]
        print(
            f"{key[0]:12} {key[1]:15}: 1k {small * 1e3:9.2f} ms, 100k {large * 1e3:9.2f} ms "
            f"({large / small:.1f}x)"
        )


def main() -> None:
    print(f"SQLite {sqlean.sqlite_version} (sqlean.py)")
    with tempfile.TemporaryDirectory() as folder:
        appends(folder)
        searches(folder)


if __name__ == "__main__":
    main()
