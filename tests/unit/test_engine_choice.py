"""Choosing the engine: a database URL on a server installed without the PostgreSQL extra is
refused at once, naming the field, rather than failing on the first request."""

from __future__ import annotations

import sys

import pytest

from chat_history.errors import InvalidParams
from chat_history.store.choice import database_option

URL = "postgresql://ada@db.example/history"


def test_a_url_is_taken_when_the_driver_is_installed() -> None:
    assert database_option({"database": URL}, env={}) == URL
    assert database_option({}, env={"CHAT_HISTORY_DATABASE_URL": URL}) == URL
    assert database_option({}, env={}) is None


@pytest.mark.parametrize(
    ("options", "env", "field"),
    [
        ({"database": URL}, {}, "database"),
        ({}, {"CHAT_HISTORY_DATABASE_URL": URL}, "CHAT_HISTORY_DATABASE_URL"),
    ],
)
def test_without_the_driver_a_url_names_its_field_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, str], env: dict[str, str], field: str
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(InvalidParams) as caught:
        database_option(options, env=env)
    assert caught.value.field == field
    assert "chat-history-server[postgres]" in caught.value.why
    assert database_option({}, env={}) is None  # SQLite needs no driver
