"""``chat-history``: the command-line tool over the same ChatHistoryManager as the server — list,
show, search, prune, export/import (JSONL, ``transfer.py``), stats, workspaces, demo, and the
edits a person makes by hand: rename, truncate, fork. Only ``prune`` and ``truncate`` delete; the
read commands turn storage retention off so that looking at a history never changes it. Here:
the parser and the run of a command; each family of commands is a module of its own."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from chat_history import __version__
from chat_history.paths import STORAGE_ENV

if TYPE_CHECKING:
    from chat_history.cli.common import Subcommand

    _Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _Subparsers = argparse._SubParsersAction


class Command(NamedTuple):
    """A subcommand as ``chat-history --help`` lists it: its name, its help (also its
    description), and its family's ``Subcommand`` (how it runs, its arguments): ``entry`` in the
    module ``chat_history.cli.<family>``."""

    name: str
    help: str
    family: str
    entry: str


#: Every subcommand, in the order ``chat-history --help`` lists them (``demo`` last, apart). A
#: family's module (and what it imports: importers, export format, rendering, the SDKs' glue) is
#: imported only when one of its commands is parsed, so ``chat-history mcp`` loads none of the
#: others' (issue 45).
COMMANDS: tuple[Command, ...] = (
    Command("conversations", "list conversations (all workspaces)", "conversations", "LIST"),
    Command("show", "print a conversation's stored history", "conversations", "SHOW"),
    Command(
        "search", "find stored messages by their text (as chatHistory/search)", "search", "SEARCH"
    ),
    Command("prune", "apply storage retention to every conversation now", "storage", "PRUNE"),
    Command("rename", "set a conversation's title", "edits", "RENAME"),
    Command("truncate", "delete message #ID and every later one, for good", "edits", "TRUNCATE"),
    Command("fork", "copy a conversation into a new one", "edits", "FORK"),
    Command("export", "write conversations as JSONL to stdout", "archive", "EXPORT"),
    Command(
        "import",
        "import a JSONL export, or another tool's history with --from (never duplicates)",
        "archive",
        "IMPORT",
    ),
    Command("stats", "database size, counts and the settings in force", "storage", "STATS"),
    Command(
        "workspaces", "list workspaces with conversations (listWorkspaces)", "workspaces", "LIST"
    ),
    Command(
        "move-workspace",
        "move every conversation of FROM to TO (one change)",
        "workspaces",
        "MOVE",
    ),
    Command("purge", "take deleted text out of the database files now", "storage", "PURGE"),
    Command(
        "mcp",
        "serve this workspace's history to agents over MCP (stdio, or local HTTP with --http): "
        "search_history, list_conversations, read_conversation, and each conversation as a "
        "resource",
        "agents",
        "MCP",
    ),
    Command(
        "acp",
        "stand between an editor and an ACP agent (stdio): record its sessions and serve "
        "session/list, load, resume, fork and delete from the store where the agent lacks them",
        "agents",
        "ACP",
    ),
)

DB_HELP = (
    "storage folder or .sqlite3 file (default: as the server: "
    f"${STORAGE_ENV}, else the per-user data folder)"
)
DATABASE_HELP = (
    "a PostgreSQL database (libpq connection string or postgresql:// URI, no password: "
    "PGPASSWORD, ~/.pgpass or a service file give it); default $CHAT_HISTORY_DATABASE_URL"
)


def subcommand(command: Command) -> Subcommand:
    """The family's declaration of ``command`` (its module imported now)."""
    entry: Subcommand = getattr(
        importlib.import_module(f"chat_history.cli.{command.family}"), command.entry
    )
    return entry


def _common_arguments(p: argparse.ArgumentParser) -> None:
    """``--db`` and ``--database``, given to every subcommand too so that they may follow it;
    SUPPRESS keeps one given before the subcommand from being reset."""
    p.add_argument("--db", type=Path, metavar="PATH", default=argparse.SUPPRESS, help=DB_HELP)
    p.add_argument("--database", metavar="URL", default=argparse.SUPPRESS, help=DATABASE_HELP)


def _settings_arguments(p: argparse.ArgumentParser) -> None:
    """The retention settings a command runs under (default: the schema's defaults)."""
    group = p.add_argument_group("settings (default: the schema's defaults)")
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


def declare(p: argparse.ArgumentParser, command: Command) -> None:
    """Give the subcommand's parser ``p`` its arguments and the function that runs it."""
    entry = subcommand(command)
    _common_arguments(p)
    if entry.settings:
        _settings_arguments(p)
    entry.arguments(p)
    p.set_defaults(run=entry.run)


class _Commands(_Subparsers):
    """The subcommands: the one named on the command line is declared (``declare``) just before
    it parses the rest (its own ``--help`` included); the others are only a name and a help."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        name = values[0] if isinstance(values, list) and values else None
        command = next((c for c in COMMANDS if c.name == name), None)
        chosen = self._name_parser_map.get(name) if isinstance(name, str) else None
        if command is not None and chosen is not None and chosen.get_default("run") is None:
            declare(chosen, command)
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    """The ``chat-history`` parser: ``--db`` and ``--version``, and one subcommand per entry of
    ``COMMANDS``, each declared only when it is the one parsed."""
    parser = argparse.ArgumentParser(
        prog="chat-history",
        description="Inspect, prune, export and import the chat history database of "
        "chat-history-server.",
    )
    parser.add_argument("--db", type=Path, metavar="PATH", help=DB_HELP)
    parser.add_argument("--database", metavar="URL", help=DATABASE_HELP)
    parser.add_argument("--version", action="version", version=f"chat-history {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", action=_Commands)
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.help, description=command.help)
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
    # Loaded with the command's family, which every family imports.
    from chat_history.cli.common import EXIT_FAILURE, EXIT_STORAGE, EXIT_USAGE, CliError
    from chat_history.errors import StorageError

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
