"""Which engine holds the history: PostgreSQL when a ``database`` is named
(``initializationOptions.database``, else ``CHAT_HISTORY_DATABASE_URL``; the CLI's
``--database``), else SQLite in the storage folder. Not a ``chatHistory`` setting: a workspace's
settings must not redirect history."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chat_history.errors import InvalidParams
from chat_history.store.connection import Store
from chat_history.store.postgres.url import (
    DATABASE_ENV,
    PURGE_ENV,
    check_database,
    check_purge_seconds,
)
from chat_history.store.seam import HistoryStore


def database_option(options: Mapping[str, Any], env: Mapping[str, str] = os.environ) -> str | None:
    """The checked database URL of ``options`` (field ``database``) or the environment; None for
    SQLite. InvalidParams naming the field (``database``, or the variable) when it is unusable."""
    if options.get("database") is not None:
        return check_database(_engine_installed(options["database"], "database"), "database")
    from_env = env.get(DATABASE_ENV, "")
    if from_env.strip():
        return check_database(_engine_installed(from_env, DATABASE_ENV), DATABASE_ENV)
    return None


def _engine_installed(url: object, field: str) -> object:
    """``url`` when the PostgreSQL engine's driver can be imported here, else InvalidParams naming
    ``field``: psycopg is the ``postgres`` extra (it has no wheel for every platform the server
    runs on, Windows on Arm among them), so a server installed without it says so at once."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise InvalidParams(
            field,
            "the PostgreSQL engine needs psycopg 3, which is not installed with this server "
            "(install chat-history-server[postgres] into the Python that runs it)",
        ) from None
    return url


def purge_option(options: Mapping[str, Any], env: Mapping[str, str] = os.environ) -> float | None:
    """The purge interval of ``options`` (``purgeSeconds``) or the environment; None: default."""
    if options.get("purgeSeconds") is not None:
        return check_purge_seconds(options["purgeSeconds"], "purgeSeconds")
    from_env = env.get(PURGE_ENV, "")
    if from_env.strip():
        try:
            value: object = float(from_env)
        except ValueError:
            value = from_env
        return check_purge_seconds(value, PURGE_ENV)
    return None


def open_store(folder: Path, url: str | None, purge: float | None = None) -> HistoryStore:
    """The store: PostgreSQL at ``url``, else SQLite in ``folder``."""
    if url is None:
        return Store(folder)
    from chat_history.store.postgres import PostgresStore

    if purge is None:
        return PostgresStore(url)
    return PostgresStore(url, purge_seconds=purge)
