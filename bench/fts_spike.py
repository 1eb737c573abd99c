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

from test_fts_residue import CHOSEN_INDEX, MESSAGES  # noqa: E402

from chat_history.policy.search import fts_plan, match_row, parse_query, stored_fold  # noqa: E402

WORDS = [
    "".join(random.Random(i).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3 + i % 7))
    for i in range(5_000)
]
ACCENTED = ["café", "résumé", "naïve", "Straße", "東京都", "日本語の文章", "über"]
RARE = "zephyrquill"  # planted in exactly 20 rows at every size


def message(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 120))]
    if rng.random() < 0.1:
        words.insert(rng.randrange(len(words)), rng.choice(ACCENTED))
    return " ".join(words)


def connect(path: Path, indexed: bool) -> Any:
    connection = sqlean.connect(str(path), isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "secure_delete = ON"):
        connection.execute(f"PRAGMA {pragma}")
    connection.execute(MESSAGES)
    for statement in CHOSEN_INDEX if indexed else []:
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


def best(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def search(connection: Any, query: str, limit: int = 50) -> list[tuple[float, int]]:
    """The whole pipeline: index candidates, the exact matcher with snippets, relevance then
    recency, the first ``limit``."""
    parsed = parse_query(query)
    expression = fts_plan(parsed).expression
    rows = connection.execute(
        "SELECT m.id, m.content FROM search JOIN messages m ON m.id = search.rowid "
        "WHERE search MATCH ?",
        (expression,),
    )
    hits = []
    for row_id, content in rows:
        found = match_row(content, parsed)
        if found is not None:
            hits.append((-found.relevance, -row_id))
    hits.sort()
    return hits[:limit]


def like(connection: Any, word: str) -> list[Any]:
    sql = "SELECT id, content FROM messages WHERE content LIKE ? ORDER BY id DESC LIMIT 50"
    return list(connection.execute(sql, (f"%{word}%",)))


def size(path: Path) -> int:
    return sum(
        os.path.getsize(f"{path}{suffix}")
        for suffix in ("", "-wal")
        if os.path.exists(f"{path}{suffix}")
    )


def main() -> None:
    print(f"SQLite {sqlean.sqlite_version} (sqlean.py)")
    with tempfile.TemporaryDirectory() as folder:
        # Append: one transaction per row, as the store appends, on a 1,000-row database.
        for indexed in (False, True):
            path = Path(folder) / f"append-{indexed}.sqlite3"
            connection = connect(path, indexed)
            rng = random.Random(1)
            fill(connection, 1_000, rng)
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
            print(f"append {'with' if indexed else 'without'} index: {per * 1e6:.0f} µs/row")
            connection.close()
        # Size and search at 1,000 and 100,000 rows.
        figures: dict[tuple[int, str], float] = {}
        for rows in (1_000, 100_000):
            sizes = {}
            for indexed in (False, True):
                path = Path(folder) / f"size-{rows}-{indexed}.sqlite3"
                connection = connect(path, indexed)
                fill(connection, rows, random.Random(2))
                sizes[indexed] = size(path)
                if indexed:
                    common = WORDS[7]
                    for label, query in (
                        ("rare", RARE),
                        ("two rare", f"{RARE} zephyr"),
                        ("accented", "cafe"),
                        ("common", common),
                    ):
                        figures[(rows, label)] = best(lambda q=query: search(connection, q), 5)
                    figures[(rows, "like")] = best(lambda: like(connection, RARE), 3)
                    hits = len(search(connection, common, limit=10**9))
                    print(f"{rows} rows: common word {common!r} matches {hits} rows")
                connection.close()
            overhead = sizes[True] / sizes[False]
            print(
                f"{rows} rows: {sizes[False] / 1e6:.1f} MB without index, "
                f"{sizes[True] / 1e6:.1f} MB with ({overhead:.2f}x)"
            )
        for label in ("rare", "two rare", "accented", "common", "like"):
            small, large = figures[(1_000, label)], figures[(100_000, label)]
            print(
                f"search {label:9}: 1k {small * 1e3:8.2f} ms, 100k {large * 1e3:8.2f} ms "
                f"({large / small:.1f}x)"
            )
        rare = figures[(100_000, "rare")]
        print(
            f"LIKE scan / indexed rare-word search at 100k: {figures[(100_000, 'like')] / rare:.0f}x"
        )


if __name__ == "__main__":
    main()
