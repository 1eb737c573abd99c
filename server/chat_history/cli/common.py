"""What every ``chat-history`` command shares: the exit statuses and ``CliError``, the database
and settings a command opens, a conversation named on the command line, ``--json`` output, and
``Subcommand``, the entry each family of commands declares (cli/main.py names them)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from chat_history.cli.settings_file import SettingsFileError, read_settings_file
from chat_history.errors import InvalidParams, StorageError
from chat_history.model import JsonText
from chat_history.paths import STORAGE_ENV, default_storage_folder
from chat_history.service import conversations as service_conversations
from chat_history.service import replies
from chat_history.service.conversations import ConversationInfo
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.workspaces import machine_id, named_workspace
from chat_history.settings import SECTION, Settings, load_settings, setting_key
from chat_history.store import DATABASE_FILE, EngineOptions, Key, database_option

EXIT_FAILURE = 1  # missing database or conversation, a bad import file, a bad settings file
EXIT_USAGE = 2  # bad arguments (argparse's own status)
EXIT_STORAGE = 3  # the database cannot be opened, read or written (1002 StorageError)

#: The retention flags: argparse dests, each the name of the Settings field it sets (its key is
#: ``settings.setting_key`` of it, its flag the name dashed).
RETENTION_FLAGS = ("max_messages", "max_tokens", "max_age_hours", "preserve_system_messages")


class CliError(Exception):
    """A command that cannot do what was asked: printed as one line on stderr, and ``code`` is the
    exit status (1, or 2 for a usage error)."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """A subcommand with only the common options."""


@attrs.frozen
class Subcommand:
    """One subcommand of ``chat-history`` as its family declares it: the function that runs it
    (its exit status), the arguments it adds, and whether it takes the retention settings'
    options (``--settings``, ``--max-messages`` …). Its name and help are in cli/main.py's
    ``COMMANDS``, which imports its family only when the command is parsed."""

    run: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    settings: bool = False


# -- database and settings -----------------------------------------------------------------------


def database_location(db: Path | None) -> tuple[Path, str]:
    """(folder, file name) of ``--db`` (a folder or a database file), else the server's default."""
    if db is None:
        return default_storage_folder(), DATABASE_FILE
    db = db.expanduser()
    if db.is_dir():
        return db, DATABASE_FILE
    if db.is_file() or db.suffix in {".sqlite3", ".sqlite", ".db"}:
        return db.parent, db.name
    return db, DATABASE_FILE


def cli_database(args: argparse.Namespace) -> str | None:
    """The PostgreSQL database of ``--database`` (else ``$CHAT_HISTORY_DATABASE_URL`` unless
    ``--db`` names a SQLite store); None: SQLite."""
    given = getattr(args, "database", None)
    try:
        if given is not None:
            return database_option(EngineOptions(database=given), {})
        if getattr(args, "db", None) is not None:
            return None
        return database_option(EngineOptions())
    except InvalidParams as exc:
        raise CliError(f"--database {exc}", EXIT_USAGE) from None


def open_manager(
    args: argparse.Namespace, settings: Settings | None = None, *, create: bool = False
) -> ChatHistoryManager:
    """A manager on the database ``--db`` names (else the server's default); a missing one is a
    CliError, unless the command creates it (``import``)."""
    url = cli_database(args)
    if url is not None:
        return _tended(ChatHistoryManager.on_database(url, settings))
    folder, name = database_location(args.db)
    path = folder / name
    if not create and not path.is_file():
        where = "--db" if args.db is not None else f"${STORAGE_ENV} or the default folder"
        raise CliError(
            f"no database at {path} (from {where}): nothing has been recorded there; "
            "pass --db PATH to name the storage folder or the .sqlite3 file"
        )
    return _tended(ChatHistoryManager.open(path, settings))


def _tended(manager: ChatHistoryManager) -> ChatHistoryManager:
    """The CLI, as any process on the database, ends replies whose writer's lease expired (a
    killed server's) as interrupted before it reads (protocol.md "Replies in flight"); a
    database it cannot write now is left to the next process."""
    with contextlib.suppress(StorageError):
        replies.tend(manager)
    return manager


@attrs.frozen
class CliSettings:
    """The settings a command runs under, and where each came from (``stats`` shows both)."""

    settings: Settings
    #: where each key given explicitly came from (full dotted key -> file path or flag)
    sources: dict[str, str]


def load_cli_settings(args: argparse.Namespace) -> CliSettings:
    """Settings from ``--settings`` (VS Code settings.json) and the flags, validated by the
    server's loader: a bad value in the file falls back to its default with a warning (as in the
    server), a bad flag is a usage error."""
    section: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if args.settings is not None:
        try:
            section = read_settings_file(args.settings)
        except SettingsFileError as exc:
            raise CliError(str(exc)) from None
        sources = {f"{SECTION}.{key}": str(args.settings) for key in section}
    for dest in RETENTION_FLAGS:
        key = setting_key(dest)
        value = getattr(args, dest)
        if value is not None:
            section[key] = value
            sources[f"{SECTION}.{key}"] = "--" + dest.replace("_", "-")
    loaded = load_settings(section)
    for problem in loaded.problems:
        source = sources.get(problem.key, "")
        if source.startswith("--"):
            raise CliError(f"argument {source}: {problem.why}", EXIT_USAGE)
        warn(f"{source}: {problem.message()}")
    for key in loaded.unknown_keys:
        warn(f"{args.settings}: ignoring unknown setting {key}")
    return CliSettings(loaded.settings, sources)


def warn(message: str) -> None:
    """A warning on stderr: the command goes on."""
    print(f"chat-history: warning: {message}", file=sys.stderr)


def records(manager: ChatHistoryManager, workspace: str | None) -> dict[Key, ConversationInfo]:
    """Every conversation of ``workspace`` (default: all) as ``listConversations`` lists it
    (one holding only a title or metadata included), ordered by workspace and id."""
    found = {
        info.key: info
        for info in service_conversations.list_page(manager, workspace, None, None).conversations
    }
    return dict(sorted(found.items(), key=lambda item: (item[0].workspace, item[0].conversation)))


def all_keys(manager: ChatHistoryManager, workspace: str | None) -> list[Key]:
    """The keys of every conversation of ``workspace`` (default: all), by workspace and id."""
    return list(records(manager, workspace))


def find_key(manager: ChatHistoryManager, conversation: str, workspace: str | None) -> Key:
    """The conversation named on the command line: in ``--workspace``, else in the one workspace
    that holds it."""
    matches = [key for key in all_keys(manager, workspace) if key.conversation == conversation]
    if not matches:
        where = f"workspace {workspace!r}" if workspace is not None else "any workspace"
        raise CliError(f"no conversation {conversation!r} in {where} of {manager.database_path}")
    if len(matches) > 1:
        listed = ", ".join(repr(key.workspace) for key in matches)
        raise CliError(
            f"conversation {conversation!r} exists in several workspaces ({listed}); "
            "pass --workspace",
            EXIT_USAGE,
        )
    return matches[0]


def reading(settings: Settings) -> Settings:
    """Settings for a read command: retention off, so that looking never deletes."""
    return attrs.evolve(settings, enable_auto_pruning=False)


def print_json(value: Any) -> None:
    """``--json`` output: indented, non-ASCII kept as it is; metadata the store hands out as its
    JSON text (``JsonText``) printed as the value it is."""
    print(json.dumps(value, indent=2, ensure_ascii=False, default=_json_value))


def _json_value(value: Any) -> Any:
    if isinstance(value, JsonText):
        return value.value()
    raise TypeError(f"{type(value).__name__} is not JSON")


def machine_of(args: argparse.Namespace) -> str:
    """This machine's id, kept in the storage folder of ``--db`` (else the default folder)."""
    folder, _ = database_location(getattr(args, "db", None))
    return machine_id(folder)


def add_holder_workspace(p: argparse.ArgumentParser) -> None:
    """``--workspace`` of a command on one conversation: which workspace holds it."""
    p.add_argument(
        "--workspace",
        metavar="W",
        type=named_workspace,
        help="needed when several workspaces hold it",
    )
