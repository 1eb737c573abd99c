"""``chat-history import --from SOURCE [PATH] [--workspace URI] [--dry-run]``: another tool's
history into the database (service.imports). It prints what it finds — each session, its
messages, what is new and what cannot be carried over — then imports it, unless ``--dry-run``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from chat_history.errors import InvalidParams
from chat_history.service import imports
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.workspaces import named_workspace


def run(
    args: argparse.Namespace,
    manager: Callable[[], ChatHistoryManager],
    fail: Callable[[str], Exception],
) -> int:
    """The import of ``args.source``; ``fail`` builds the CLI's error from a message."""
    try:
        source = imports.check_source(args.source)
        root = Path(args.file).expanduser() if args.file else imports.data_folder(source)
        folder = None if args.file or args.all_projects else str(Path.cwd())
        planned = imports.import_sessions(
            manager(),
            imports.sessions_of(source, root, folder),
            args.workspace,
            dry_run=args.dry_run,
        )
    except InvalidParams as exc:
        flag = {"source": "--from", "path": "PATH", "workspace": "--workspace"}.get(exc.field)
        raise fail(f"{flag or exc.field}: {exc.why}") from None
    if not planned:
        where = root if args.file else f"{root} for {folder or 'any folder'}"
        print(f"No {source} sessions found in {where}.")
        return 0
    verb = "Would import" if args.dry_run else "Imported"
    for entry in planned:
        print(
            f"{entry.status:9}  {entry.conversation_id}  {entry.messages} message(s), "
            f"{entry.new_messages} new  [{entry.workspace}]  {entry.title or ''}"
        )
        for skipped in entry.skipped:
            print(f"           skipped {skipped.count} {skipped.what}: {skipped.why}")
    added = sum(entry.new_messages for entry in planned)
    touched = sum(1 for entry in planned if entry.new_messages)
    print(f"{verb} {added:,} message(s) into {touched:,} of {len(planned):,} conversation(s).")
    if args.dry_run:
        print("Dry run: nothing was written.")
    _warn_about_age(planned)
    return 0


def _warn_about_age(planned: list[imports.PlannedImport]) -> None:
    """What retention deletes at the next read (each entry's ``retention``, the rule of
    policy.retention under the settings in force): the import deletes nothing, the next read
    does."""
    doomed = [e.retention for e in planned if e.retention is not None]
    if not doomed:
        return
    rows = sum(report.dropped_messages for report in doomed)
    reasons = sorted({reason for report in doomed for reason in report.reasons})
    print(
        f"Note: retention ({', '.join(reasons)}) deletes {rows:,} of these message(s), in "
        f"{len(doomed)} conversation(s), at the next read. With chatHistory.maxAgeHours at its "
        "default (720), turns older than 30 days go; set it higher, or to 0, to keep imported "
        "history.",
        file=sys.stderr,
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``import``'s options for another tool's history."""
    p.add_argument(
        "--from",
        dest="source",
        metavar="SOURCE",
        help=f"another tool's history: {', '.join(imports.SUPPORTED)} (PATH: a session file "
        "or folder; default: the tool's own folder, sessions of the current folder)",
    )
    p.add_argument(
        "--workspace",
        metavar="URI",
        type=named_workspace,
        help="the workspace to import into",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be imported")
    p.add_argument(
        "--all-projects",
        action="store_true",
        help="with --from and no PATH: every project's sessions, not only the current folder's",
    )
