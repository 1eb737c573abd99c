"""``chat-history``: the command-line tool over the same ChatHistoryManager as the server — list,
show, search, prune, export/import (JSONL, ``transfer.py``), stats, workspaces, demo, and the
edits a person makes by hand: rename, truncate, fork. Only ``prune`` and ``truncate`` delete; the
read commands turn storage retention off so that looking at a history never changes it. Here:
the parser and the run of a command; each family of commands is a module of its own."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from chat_history import __version__
from chat_history.cli import agents, archive, conversations, edits, search, storage, workspaces
from chat_history.cli.common import EXIT_FAILURE, EXIT_STORAGE, EXIT_USAGE, CliError, Subcommand
from chat_history.errors import StorageError
from chat_history.paths import STORAGE_ENV

#: Every subcommand, in the order ``chat-history --help`` lists them (``demo`` last, apart).
COMMANDS: tuple[Subcommand, ...] = (
    conversations.LIST,
    conversations.SHOW,
    search.SEARCH,
    storage.PRUNE,
    edits.RENAME,
    edits.TRUNCATE,
    edits.FORK,
    archive.EXPORT,
    archive.IMPORT,
    storage.STATS,
    workspaces.LIST,
    workspaces.MOVE,
    storage.PURGE,
    agents.MCP,
    agents.ACP,
)


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


def build_parser() -> argparse.ArgumentParser:
    """The ``chat-history`` parser: ``--db`` and ``--version``, and one subcommand per entry of
    ``COMMANDS``."""
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
    for command in COMMANDS:
        parents = [common, settings] if command.settings else [common]
        p = sub.add_parser(
            command.name, help=command.help, description=command.help, parents=parents
        )
        p.set_defaults(run=command.run)
        command.arguments(p)
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
