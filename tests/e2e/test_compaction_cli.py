"""The CLI's ``show`` marks the rows a summary stands in for (issue 15)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_cli import env, manager, run

from chat_history.model import Message
from chat_history.service import history
from chat_history.store import Key

KEY = Key("ws", "long")
__all__ = ["env"]  # the fixture, used by name


def test_show_marks_the_rows_the_summary_covers(tmp_path: Path, env: dict[str, str]) -> None:
    seeded = manager(tmp_path)
    rows: list[Message] = [Message(role="system", content="Be brief.")]
    for n in range(1, 5):
        rows += [Message(role="user", content=f"q{n}"), Message(role="assistant", content=f"a{n}")]
    stored = history.append(seeded, KEY, rows).messages
    # covers turns 1 and 2 (rows #2-#5); the system row is still sent, so it is not marked
    history.save_summary(seeded, KEY, "Two questions answered.", stored[4].id)
    seeded.store.close()
    result = run(env, "show", "long", "--db", tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    marked = [line for line in lines if line.endswith("  [summarized]")]
    assert [line.split("] ", 1)[1] for line in marked] == [
        f"{row.role} #{row.id}  [summarized]" for row in stored[1:5]
    ]
    header = next(line for line in lines if line.startswith("Summary ("))
    assert header.endswith(
        f", covers through #{stored[4].id}: sent instead of 2 turns (4 messages marked "
        "[summarized])):"
    )
    assert any(line.endswith(f"] system #{stored[0].id}") for line in lines)
