"""``chat-history``: the command-line tool over the same ChatHistoryManager as the server — list,
show, prune, export/import (JSONL, ``transfer.py``), stats, demo, and the edits a person makes by
hand: rename, truncate, fork. Only ``prune`` and ``truncate`` delete; the read commands turn
storage retention off so that looking at a history never changes it."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from chat_history import __version__
from chat_history.cli import agents
from chat_history.cli import imports as import_from
from chat_history.cli.progress import Progress
from chat_history.cli.render import conversations_table, history_text, prune_text, search_text, when
from chat_history.cli.settings_file import SettingsFileError, read_settings_file
from chat_history.cli.transfer import (
    ConversationImport,
    ImportFileError,
    conversation_lines,
    dumps,
    header_line,
    read_import,
)
from chat_history.errors import InvalidParams, StorageError
from chat_history.model import ROLES, JsonText
from chat_history.paths import STORAGE_ENV, default_storage_folder
from chat_history.service.conversations import ConversationInfo
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.storage_retention import PruneRun, tally
from chat_history.service.workspaces import machine_id, named_workspace
from chat_history.settings import (
    SECTION,
    Settings,
    default_settings,
    load_settings,
    setting_key,
)
from chat_history.store import DATABASE_FILE, EngineOptions, Key, database_option
from chat_history.wire import checks, protocol, reports
from chat_history.wire.methods import search

EXIT_FAILURE = 1  # missing database or conversation, a bad import file, a bad settings file
EXIT_USAGE = 2  # bad arguments (argparse's own status)
EXIT_STORAGE = 3  # the database cannot be opened, read or written (1002 StorageError)

#: The retention flags: argparse dests, each the name of the Settings field it sets (its key is
#: ``settings.setting_key`` of it, its flag the name dashed).
RETENTION_FLAGS = ("max_messages", "max_tokens", "max_age_hours", "preserve_system_messages")
#: What ``stats`` shows of the settings in force: Settings fields (keys derived the same way).
SHOWN_SETTINGS = (
    "enable_auto_pruning",
    "max_age_hours",
    "max_messages",
    "max_tokens",
    "preserve_system_messages",
    "max_tool_result_chars",
    "active_provider",
)


class CliError(Exception):
    """A command that cannot do what was asked: printed as one line on stderr, and ``code`` is the
    exit status (1, or 2 for a usage error)."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


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
        manager.tend_replies()
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
        for info in manager.list_conversations_page(workspace, None, None).conversations
    }
    return dict(sorted(found.items(), key=lambda item: (item[0].workspace, item[0].conversation)))


def by_workspace(
    listed: Sequence[ConversationInfo],
) -> list[tuple[str, list[ConversationInfo]]]:
    """The listing grouped by workspace (sorted), each in the listing's order: newest activity
    first."""
    groups: dict[str, list[ConversationInfo]] = {}
    for info in listed:
        groups.setdefault(info.workspace, []).append(info)
    return sorted(groups.items())


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


# -- commands ------------------------------------------------------------------------------------


def cmd_conversations(args: argparse.Namespace) -> int:
    """``conversations``: every conversation per workspace, as ``listConversations`` lists them
    (``--json``: its entries)."""
    manager = open_manager(args)
    listed = by_workspace(manager.list_conversations_page(args.workspace, None, None).conversations)
    if args.json:
        print_json(reports.wire_listing([info for _, infos in listed for info in infos]))
    elif not listed:
        where = f" in workspace {args.workspace!r}" if args.workspace is not None else ""
        print(f"No conversations{where} in {manager.database_path}.")
    else:
        print(conversations_table(listed))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``show``: one conversation's rows and summary as text, as JSON, or (``--provider``) as that
    provider's request body."""
    settings = load_cli_settings(args).settings
    manager = open_manager(args, reading(settings))
    key = find_key(manager, args.conversation, args.workspace)
    if args.provider is not None:
        try:
            request = manager.format(key, args.provider, args.model)
        except InvalidParams as exc:
            raise CliError(f"argument --provider: {exc.why}", EXIT_USAGE) from None
        print_json(protocol.wire(request))
        return 0
    result = manager.get(key)
    if args.json:
        print_json(reports.wire_history(key.workspace, key.conversation, result))
    else:
        print(history_text(key, result.messages, result.summary, full=args.full))
    return 0


#: The one table from the field id of an edit's refusal (InvalidParams) to the command-line
#: name that gave the value.
EDIT_FLAGS = {
    "title": "TITLE",
    "from_id": "--from",
    "through_id": "--through",
    "new_conversation_id": "NEW",
    "conversation_id": "CONVERSATION",
    "from": "FROM",
    "to": "TO",
}


def edited(run: Callable[[], Any]) -> Any:
    """Run an edit; a refusal (InvalidParams) is reported by its command-line name."""
    try:
        return run()
    except InvalidParams as exc:
        raise CliError(f"{EDIT_FLAGS.get(exc.field, exc.field)}: {exc.why}") from None


def cmd_rename(args: argparse.Namespace) -> int:
    """Set a conversation's title (chatHistory/updateConversation), or back to the automatic
    one with --automatic."""
    from chat_history.service.conversations import ConversationUpdate

    manager = open_manager(args)
    key = find_key(manager, args.conversation, args.workspace)
    if (args.title is None) == (not args.automatic):
        raise CliError("give a TITLE, or --automatic (not both)", EXIT_USAGE)
    change = ConversationUpdate(set_title=True, title=args.title)
    info = edited(lambda: manager.update_conversation(key, change))
    print(f"{key.conversation}: {info.title!r} ({info.title_source or 'no'} title)")
    return 0


def cmd_truncate(args: argparse.Namespace) -> int:
    """Delete message #ID and every later one (chatHistory/truncate)."""
    manager = open_manager(args)
    key = find_key(manager, args.conversation, args.workspace)
    result = edited(lambda: manager.truncate(key, args.from_id))
    gone = " and its summary" if result.summary_deleted else ""
    print(f"{key.conversation}: deleted {result.deleted_messages} message(s){gone}.")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    """Copy a conversation (through message #ID) into a new one (chatHistory/fork)."""
    manager = open_manager(args)
    key = find_key(manager, args.conversation, args.workspace)
    target = Key(args.to_workspace or key.workspace, args.new)
    info = edited(lambda: manager.fork(key, target, args.through))
    print(
        f"{info.conversation_id}: {info.message_count} message(s) copied from "
        f"{key.conversation}" + (f" into workspace {info.workspace!r}" if args.to_workspace else "")
    )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """``search``: the full-text search of ``chatHistory/search``, its refusals named by their
    flags."""
    params = search.SearchParams(
        query=args.query,
        conversation_id=args.conversation,
        workspace=args.workspace,
        all_workspaces=args.workspace is None,
        roles=args.role,
        limit=args.limit,
    )
    try:
        scope, query, limit = search.search_args(params, checks.SessionWorkspace(""))
    except InvalidParams as exc:
        flag = {"query": "QUERY", "limit": "--limit", "workspace": "--workspace"}
        name = flag.get(exc.field, "--conversation" if exc.field == "conversationId" else "--role")
        raise CliError(f"argument {name}: {exc.why}", EXIT_USAGE) from None
    result = open_manager(args, reading(default_settings())).search(scope, query, limit)
    if args.json:
        print_json(search.wire_search(result))
    else:
        print(search_text(result.hits, result.has_more))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """``prune``: storage retention of every conversation now (``--dry-run``: what it would delete),
    whether automatic pruning is on or not."""
    loaded = load_cli_settings(args)
    # Running prune is the request to prune: enableAutoPruning governs automatic runs only.
    settings = attrs.evolve(loaded.settings, enable_auto_pruning=True)
    run = prune(open_manager(args, settings), args.workspace, dry_run=args.dry_run)
    if args.json:
        print_json(reports.wire_prune_run(run))
    else:
        print(prune_text(run, settings))
    return 0


def prune(manager: ChatHistoryManager, workspace: str | None, *, dry_run: bool) -> PruneRun:
    """Storage retention of every conversation of ``workspace`` (default: all), with progress."""
    keys = all_keys(manager, workspace)
    plans = []
    with Progress("pruning", len(keys)) as progress:
        for key in keys:
            plans.append((key, manager.retain(key, dry_run=dry_run)))
            progress.advance()
    return tally(dry_run, plans)


def _write_lines(lines: Iterator[dict[str, Any]], sink: Any, progress: Progress) -> None:
    for line in lines:
        sink.write((dumps(line) + "\n").encode("utf-8"))
        if line["type"] == "message":
            progress.advance()


def cmd_export(args: argparse.Namespace) -> int:
    """``export``: the conversations (all, or those named) as JSONL on stdout, in the export format
    of ``cli/transfer.py``."""
    manager = open_manager(args, reading(default_settings()))
    found = records(manager, args.workspace)
    keys = list(found)
    if args.conversations:
        chosen = {find_key(manager, c, args.workspace) for c in args.conversations}
        keys = [key for key in keys if key in chosen]
    total = sum(found[key].message_count for key in keys)
    sink = sys.stdout.buffer
    with Progress("exporting", total) as progress:
        sink.write((dumps(header_line()) + "\n").encode("utf-8"))
        for key in keys:
            result = manager.get(key)
            _write_lines(conversation_lines(key, result.messages, result.summary), sink, progress)
    sink.flush()
    return 0


def _read_file(path: str) -> list[ConversationImport]:
    if path == "-":
        return read_import(sys.stdin.buffer)
    try:
        size = os.path.getsize(path)
        stream = open(path, "rb")  # noqa: SIM115 - closed below, after the progress bar
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    with stream, Progress("reading", size, long_work=1_000_000) as progress:
        return read_import(stream, progress.advance)


def cmd_import(args: argparse.Namespace) -> int:
    """``import``: an export file into the database; rows already stored are skipped, and a
    conversation that fails is reported and skipped whole."""
    if args.source is not None:
        # retention is the server's, by its user's settings: the import itself deletes nothing
        opened = lambda: open_manager(args, reading(default_settings()), create=True)  # noqa: E731
        return import_from.run(args, opened, CliError)
    if args.file is None:
        raise CliError("import needs FILE (a JSONL export) or --from SOURCE", EXIT_USAGE)
    try:
        conversations = _read_file(args.file)
    except ImportFileError as exc:
        raise CliError(f"{args.file}:{exc.line}: {exc.why} (nothing was imported)") from None
    manager = open_manager(args, create=True)
    imported = skipped = summaries = 0
    failures: list[str] = []
    total = sum(len(c.messages) for c in conversations)
    with Progress("importing", total) as progress:
        for entry in conversations:
            try:
                result = manager.import_conversation(entry.key, entry.messages, entry.summary)
            except InvalidParams as exc:
                failures.append(
                    f"{args.file}:{entry.line_of(exc.field)}: {protocol.wire_field(exc.field)}: "
                    f"{exc.why} "
                    f"(conversation {entry.key.conversation!r} of workspace "
                    f"{entry.key.workspace!r} not imported)"
                )
                continue
            finally:
                progress.advance(len(entry.messages))
            imported += len(result.imported)
            skipped += result.skipped
            summaries += result.summary_saved
    print(
        f"Imported {imported:,} message(s) and {summaries} summar{'y' if summaries == 1 else 'ies'}"
        f" into {len(conversations) - len(failures):,} conversation(s); {skipped:,} message(s) "
        "were already stored."
    )
    for failure in failures:
        print(f"chat-history: {failure}", file=sys.stderr)
    return EXIT_FAILURE if failures else 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """``stats``: the database's size and counts, and the retention settings in force with where
    each came from."""
    loaded = load_cli_settings(args)
    manager = open_manager(args, reading(loaded.settings))
    stats = manager.stats()
    where = manager.database_path
    path = where if isinstance(where, Path) else Path("/nonexistent")  # PostgreSQL: no file
    wal = _size(Path(f"{path}-wal"))
    shown = {
        f"{SECTION}.{setting_key(name)}": getattr(loaded.settings, name) for name in SHOWN_SETTINGS
    }
    if args.json:
        sources = {k: loaded.sources.get(k, "default") for k in shown}
        print_json(reports.wire_stats(str(where), _size(path), wal, stats, shown, sources))
        return 0
    print(f"database       {where}")
    print(f"size           {_size(path):,} bytes (+ {wal:,} bytes of WAL)")
    print(f"messages       {stats.messages:,}")
    print(f"conversations  {stats.conversations:,} in {stats.workspaces:,} workspace(s)")
    print(f"summaries      {stats.summaries:,}")
    print(f"oldest message {when(stats.oldest_timestamp)}")
    print(f"newest message {when(stats.newest_timestamp)}")
    print("settings in force (retention applies on the server's reads and writes, and on prune):")
    for key, value in shown.items():
        print(f"  {key:<36} {json.dumps(value):<10} ({loaded.sources.get(key, 'default')})")
    return 0


# -- parser --------------------------------------------------------------------------------------


#: adds one subcommand: name, its function, its help text, and extra parent parsers
Command = Callable[..., argparse.ArgumentParser]


def _settings_parent() -> argparse.ArgumentParser:
    """The retention settings a command runs under (default: the schema's defaults)."""
    settings = argparse.ArgumentParser(add_help=False)
    group = settings.add_argument_group("settings (default: the schema's defaults)")
    group.add_argument(
        "--settings",
        type=Path,
        metavar="PATH",
        help='a VS Code settings.json (comments allowed; flat "chatHistory.x" keys or a nested '
        '"chatHistory" object)',
    )
    group.add_argument("--max-messages", type=int, metavar="N", help="chatHistory.maxMessages")
    group.add_argument("--max-tokens", type=int, metavar="N", help="chatHistory.maxTokens")
    group.add_argument("--max-age-hours", type=float, metavar="H", help="chatHistory.maxAgeHours")
    group.add_argument(
        "--preserve-system-messages",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="chatHistory.preserveSystemMessages",
    )
    return settings


def _inspect_commands(command: Command, settings: argparse.ArgumentParser) -> None:
    p = command("conversations", cmd_conversations, "list conversations (all workspaces)")
    p.add_argument("--workspace", metavar="W", type=named_workspace, help="only this workspace")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = command("show", cmd_show, "print a conversation's stored history", settings)
    p.add_argument("conversation", metavar="CONVERSATION")
    p.add_argument(
        "--workspace",
        metavar="W",
        type=named_workspace,
        help="needed when several workspaces hold it",
    )
    p.add_argument("--provider", metavar="KIND", help="print the provider body (format) instead")
    p.add_argument("--model", metavar="MODEL", help="model for --provider")
    p.add_argument("--json", action="store_true", help="the stored rows as JSON")
    p.add_argument("--full", action="store_true", help="do not shorten tool results")

    p = command("search", cmd_search, "find stored messages by their text (as chatHistory/search)")
    p.add_argument("query", metavar="QUERY", help='words to find; "quoted words" in order')
    p.add_argument(
        "--workspace", metavar="W", type=named_workspace, help="only this workspace (default: all)"
    )
    p.add_argument("--conversation", metavar="C", help="only this conversation")
    p.add_argument(
        "--role",
        action="append",
        choices=ROLES,
        help="rows of this role (repeatable; default: user and assistant)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="at most N results (1-200, default 50)")
    p.add_argument("--json", action="store_true", help="the result as chatHistory/search's")


def _change_commands(command: Command, settings: argparse.ArgumentParser) -> None:
    p = command("prune", cmd_prune, "apply storage retention to every conversation now", settings)
    p.add_argument("--dry-run", action="store_true", help="report what would go; delete nothing")
    p.add_argument("--workspace", metavar="W", type=named_workspace, help="only this workspace")
    p.add_argument("--json", action="store_true", help="machine-readable report")

    p = command("rename", cmd_rename, "set a conversation's title")
    p.add_argument("conversation", metavar="CONVERSATION")
    p.add_argument("title", nargs="?", metavar="TITLE", help="1-200 characters")
    p.add_argument("--automatic", action="store_true", help="back to the automatic title")
    p.add_argument(
        "--workspace",
        metavar="W",
        type=named_workspace,
        help="needed when several workspaces hold it",
    )

    p = command("truncate", cmd_truncate, "delete message #ID and every later one, for good")
    p.add_argument("conversation", metavar="CONVERSATION")
    p.add_argument("--from", dest="from_id", type=int, required=True, metavar="ID")
    p.add_argument(
        "--workspace",
        metavar="W",
        type=named_workspace,
        help="needed when several workspaces hold it",
    )

    p = command("fork", cmd_fork, "copy a conversation into a new one")
    p.add_argument("conversation", metavar="CONVERSATION")
    p.add_argument("new", metavar="NEW", help="the new conversation's id")
    p.add_argument("--through", type=int, metavar="ID", help="copy up to message #ID")
    p.add_argument(
        "--workspace",
        metavar="W",
        type=named_workspace,
        help="needed when several workspaces hold it",
    )
    p.add_argument(
        "--to-workspace", metavar="W", type=named_workspace, help="the new conversation's workspace"
    )


def _archive_commands(command: Command, settings: argparse.ArgumentParser) -> None:
    p = command("export", cmd_export, "write conversations as JSONL to stdout")
    p.add_argument("conversations", nargs="*", metavar="CONVERSATION", help="default: all")
    p.add_argument("--workspace", metavar="W", type=named_workspace, help="only this workspace")

    p = command(
        "import",
        cmd_import,
        "import a JSONL export, or another tool's history with --from (never duplicates)",
    )
    p.add_argument(
        "file", metavar="FILE", nargs="?", help="the .jsonl file (- for stdin), or with --from PATH"
    )
    import_from.add_arguments(p)

    p = command("stats", cmd_stats, "database size, counts and the settings in force", settings)
    p.add_argument("--json", action="store_true", help="machine-readable output")


# -- version 3: workspaces and the engine's purge ------------------------------------------


def machine_of(args: argparse.Namespace) -> str:
    folder, _ = database_location(getattr(args, "db", None))
    return machine_id(folder)


def cmd_workspaces(args: argparse.Namespace) -> int:
    manager = open_manager(args)
    infos = manager.workspace_infos(machine_of(args))
    if args.json:
        print_json({"workspaces": protocol.wire(infos)})
        return 0
    if not infos:
        print(f"No workspaces in {manager.database_path}.")
        return 0
    for info in infos:
        where = ""
        if info.folder is not None:
            state = {True: "", False: " (gone)", None: " (another machine)"}[info.folder_exists]
            where = f"  {info.folder}{state}"
        print(
            f"{info.workspace}  {info.conversations} conversation(s), last "
            f"{when(info.last_activity)}{where}"
        )
        for renamed in info.renamed:
            print(
                f"  {renamed.conversation_id!r} was {renamed.was!r} under {renamed.from_} "
                f"(renamed {when(renamed.at)}: its id was taken here)"
            )
    return 0


def cmd_move_workspace(args: argparse.Namespace) -> int:
    manager = open_manager(args)
    moved = edited(lambda: manager.move_workspace(args.source, args.target))
    print(f"moved {moved} conversation(s) from {args.source} to {args.target}.")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    manager = open_manager(args)
    if not manager.purge():
        raise CliError("the purge did not finish (see the log above); nothing was lost")
    print(f"purged deleted text from {manager.database_path}.")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``mcp``: the recall server on stdio, read-only (storage retention off)."""
    if cli_database(args) is None:
        agents.check_store(database_location(args.db), given=args.db is not None)
    manager = open_manager(args, reading(default_settings()), create=True)
    return agents.serve_mcp(args, manager, machine_of(args))


def cmd_acp(args: argparse.Namespace) -> int:
    """``acp -- AGENT …``: the recording proxy before an ACP agent (it writes: retention on)."""
    manager = open_manager(args, create=True)
    return agents.serve_acp(args, manager, machine_of(args))


def _workspace_commands(command: Command) -> None:
    p = command("workspaces", cmd_workspaces, "list workspaces with conversations (listWorkspaces)")
    p.add_argument("--json", action="store_true", help="the result as chatHistory/listWorkspaces's")
    p = command(
        "move-workspace", cmd_move_workspace, "move every conversation of FROM to TO (one change)"
    )
    p.add_argument("source", metavar="FROM", help="the workspace identity that holds them")
    p.add_argument("target", metavar="TO", help="the workspace identity to hold them")
    command("purge", cmd_purge, "take deleted text out of the database files now")


def build_parser() -> argparse.ArgumentParser:
    """The ``chat-history`` parser: ``--db`` and ``--version``, and one subcommand per ``cmd_*``."""
    parser = argparse.ArgumentParser(
        prog="chat-history",
        description="Inspect, prune, export and import the chat history database of "
        "chat-history-server.",
    )
    db_help = (
        "storage folder or .sqlite3 file (default: as the server: "
        f"${STORAGE_ENV}, else the per-user data folder)"
    )
    parser.add_argument("--db", type=Path, metavar="PATH", help=db_help)
    database_help = (
        "a PostgreSQL database (libpq connection string or postgresql:// URI, no password: "
        "PGPASSWORD, ~/.pgpass or a service file give it); default $CHAT_HISTORY_DATABASE_URL"
    )
    parser.add_argument("--database", metavar="URL", help=database_help)
    parser.add_argument("--version", action="version", version=f"chat-history {__version__}")
    # Given to every subcommand too, so --db may follow it; SUPPRESS keeps a --db given before
    # the subcommand from being reset.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", type=Path, metavar="PATH", default=argparse.SUPPRESS, help=db_help)
    common.add_argument("--database", metavar="URL", default=argparse.SUPPRESS, help=database_help)
    settings = _settings_parent()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, run: Callable[[argparse.Namespace], int], text: str, *parents: Any
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=text, description=text, parents=[common, *parents])
        p.set_defaults(run=run)
        return p

    _inspect_commands(command, settings)
    _change_commands(command, settings)
    _archive_commands(command, settings)
    _workspace_commands(command)
    agents.add_commands(command, cmd_mcp, cmd_acp)
    sub.add_parser("demo", help="run the live demo (python -m chat_history.demo)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``chat-history``: run the command and return its exit status (``demo`` hands its arguments to
    the demo)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    if arguments[:1] == ["demo"]:
        from chat_history import demo

        return demo.main(arguments[1:])
    parser = build_parser()
    args = parser.parse_args(arguments)
    try:
        code = int(args.run(args))
    except CliError as exc:
        if exc.code == EXIT_USAGE:
            parser.exit(EXIT_USAGE, f"{parser.prog}: error: {exc}\n")
        print(f"chat-history: {exc}", file=sys.stderr)
        return exc.code
    except StorageError as exc:
        print(f"chat-history: {exc}", file=sys.stderr)
        return EXIT_STORAGE
    except BrokenPipeError:  # ``export | head``: the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
