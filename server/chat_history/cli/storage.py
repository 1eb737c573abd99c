"""The database as a whole: ``prune`` (storage retention of every conversation now), ``stats``
(its size, counts and the settings in force) and ``purge`` (deleted text taken out of its files)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import attrs

from chat_history.cli.common import (
    CliError,
    Subcommand,
    all_keys,
    load_cli_settings,
    open_manager,
    print_json,
    reading,
)
from chat_history.cli.progress import Progress
from chat_history.cli.render import prune_text, when
from chat_history.service import usage
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.storage_retention import PruneRun, tally
from chat_history.service.workspaces import named_workspace
from chat_history.settings import SECTION, setting_key
from chat_history.wire import reports

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
            plans.append((key, usage.retain(manager, key, dry_run=dry_run)))
            progress.advance()
    return tally(dry_run, plans)


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
    stats = usage.stats(manager)
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


def cmd_purge(args: argparse.Namespace) -> int:
    """``purge``: the deleted text taken out of the database files now (the engine's purge)."""
    manager = open_manager(args)
    if not usage.purge(manager):
        raise CliError("the purge did not finish (see the log above); nothing was lost")
    print(f"purged deleted text from {manager.database_path}.")
    return 0


def _prune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="report what would go; delete nothing")
    p.add_argument("--workspace", metavar="W", type=named_workspace, help="only this workspace")
    p.add_argument("--json", action="store_true", help="machine-readable report")


def _stats_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


PRUNE = Subcommand(cmd_prune, _prune_arguments, settings=True)
STATS = Subcommand(cmd_stats, _stats_arguments, settings=True)
PURGE = Subcommand(cmd_purge)
