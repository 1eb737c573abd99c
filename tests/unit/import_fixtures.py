"""What the import tests (test_import_*.py) share: a manager over a real SQLite file in
``tmp_path`` that imports write into, with automatic pruning off (so every imported row stays to
be compared), closed at the end of the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from chat_history.service.manager import ChatHistoryManager
from chat_history.settings import default_settings


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ChatHistoryManager]:
    settings = attrs.evolve(default_settings(), enable_auto_pruning=False)
    opened = ChatHistoryManager.open(tmp_path / "h.sqlite3", settings)
    try:
        yield opened
    finally:
        opened.close()
