"""``chat-history``'s parser (cli/main.py): each subcommand is named once in ``COMMANDS``, and the
command parsed imports its own family of commands and no other (issue 45): ``chat-history mcp``
and ``acp`` start without the importers, the export format, rendering or the PostgreSQL engine."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import chat_history.cli
from chat_history.cli import main
from chat_history.cli.common import Subcommand

#: What the agents' commands never use: the other families and what only they import.
NOT_FOR_AGENTS = (
    "chat_history.cli.archive",
    "chat_history.cli.conversations",
    "chat_history.cli.edits",
    "chat_history.cli.export_schema",
    "chat_history.cli.imports",
    "chat_history.cli.render",
    "chat_history.cli.search",
    "chat_history.cli.storage",
    "chat_history.cli.transfer",
    "chat_history.cli.workspaces",
    "chat_history.importers",
    "chat_history.service.imports",
    "chat_history.wire.methods",
    "chat_history.store.postgres.store",
)


def loaded_after_parsing(*argv: str) -> set[str]:
    """The ``chat_history`` modules a fresh Python has imported once ``argv`` is parsed (help
    printed, if asked for)."""
    script = (
        "import contextlib, io, sys\n"
        "from chat_history.cli.main import build_parser\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    build_parser().parse_args(sys.argv[1:])\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('chat_history')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2_000:]
    return set(done.stdout.split())


def under(loaded: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.parametrize(
    "argv",
    [("mcp", "--max-tokens", "2000"), ("--db", "h.sqlite3", "acp", "--", "agent", "--flag")],
    ids=["mcp", "acp"],
)
def test_the_agents_commands_import_no_other_family(argv: tuple[str, ...]) -> None:
    loaded = loaded_after_parsing(*argv)
    assert "chat_history.cli.agents" in loaded
    assert under(loaded, NOT_FOR_AGENTS) == []


def test_a_command_imports_its_family_and_the_help_none() -> None:
    in_cli = under(loaded_after_parsing("--help"), ("chat_history.cli",))
    assert in_cli == ["chat_history.cli", "chat_history.cli.main"]
    loaded = loaded_after_parsing("export", "--help")
    assert "chat_history.cli.archive" in loaded
    assert under(loaded, ("chat_history.cli.agents", "chat_history.mcp", "chat_history.acp")) == []


def test_every_subcommand_is_named_once_and_declared_by_its_family() -> None:
    names = [command.name for command in main.COMMANDS]
    assert len(names) == len(set(names))
    named = {(command.family, command.entry) for command in main.COMMANDS}
    assert all(isinstance(main.subcommand(command), Subcommand) for command in main.COMMANDS)
    declared = set()
    for module in pkgutil.iter_modules(chat_history.cli.__path__):
        if module.name in {"__main__", "main"}:
            continue
        family = importlib.import_module(f"chat_history.cli.{module.name}")
        declared |= {
            (module.name, name)
            for name, value in vars(family).items()
            if isinstance(value, Subcommand)
        }
    assert declared == named
