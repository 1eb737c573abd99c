"""Which engine holds the history: PostgreSQL when a ``database`` is named
(``initializationOptions.database``, else ``CHAT_HISTORY_DATABASE_URL``; the CLI's
``--database``), else SQLite in the storage folder. Not a ``chatHistory`` setting: a workspace's
settings must not redirect history."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

from chat_history.errors import InvalidParams
from chat_history.store.connection import Store
from chat_history.store.postgres.url import (
    DATABASE_ENV,
    PURGE_ENV,
    check_database,
    check_purge_seconds,
)
from chat_history.store.seam import HistoryStore


@attrs.frozen(kw_only=True)
class EngineOptions:
    """What ``initializationOptions`` (typed by the wire's ``InitOptions``) or the CLI's
    ``--database`` name of the engine, as sent: checked by ``database_option`` and
    ``purge_option``."""

    database: object = None
    purge_seconds: object = None


def database_option(options: EngineOptions, env: Mapping[str, str] = os.environ) -> str | None:
    """The checked database URL of ``options`` (field ``database``) or the environment; None for
    SQLite. InvalidParams naming the field (``database``, or the variable) when it is unusable."""
    if options.database is not None:
        return check_database(_engine_installed(options.database, "database"), "database")
    from_env = env.get(DATABASE_ENV, "")
    if from_env.strip():
        return check_database(_engine_installed(from_env, DATABASE_ENV), DATABASE_ENV)
    return None


def _engine_installed(url: object, field: str) -> object:
    """``url`` when the PostgreSQL engine's driver can be imported here, else InvalidParams naming
    ``field``: psycopg is the ``postgres`` extra (it has no wheel for every platform the server
    runs on, Windows on Arm among them), so a server installed or packaged without it says so at
    once. psycopg is imported here and nowhere before: a server on SQLite never loads it."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise InvalidParams(field, _no_driver(exc)) from None
    return url


def _no_driver(exc: ImportError) -> str:
    """Why the PostgreSQL engine cannot run here, and what a person can do about it."""
    cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if _packaged():
        return (
            f"the server inside this extension has no PostgreSQL driver for this platform "
            f"({platform.system()} {platform.machine()}): psycopg 3 publishes no binary build "
            f"for it ({cause}). Remove the database to keep the history in SQLite here, or run "
            f"the server with a Python 3.11+ where chat-history-server and psycopg are installed "
            f"(psycopg with PostgreSQL's libpq on the PATH)"
        )
    return (
        f"the PostgreSQL engine needs psycopg 3, which is not installed with this server "
        f"({cause}): install chat-history-server[postgres] into the Python that runs it "
        f"({sys.executable})"
    )


def _packaged() -> bool:
    """The server inside an editor extension (frozen, or ``bundled/libs`` run by boot.py): no one
    can install into its environment, so the advice differs."""
    if getattr(sys, "frozen", False):
        return True
    libs = Path(__file__).resolve().parents[2]  # libs/chat_history/store/choice.py
    return libs.name == "libs" and libs.parent.name == "bundled"


def purge_option(options: EngineOptions, env: Mapping[str, str] = os.environ) -> float | None:
    """The purge interval of ``options`` (``purgeSeconds``) or the environment; None: default."""
    if options.purge_seconds is not None:
        return check_purge_seconds(options.purge_seconds, "purgeSeconds")
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
