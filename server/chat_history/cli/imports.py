"""``chat-history import --from SOURCE [PATH] [--workspace URI] [--dry-run] [--json]``: another
tool's history into the database (service.imports). It prints what it finds — each session, its
messages, what is new, what cannot be carried over and where it goes — then imports it, unless
``--dry-run``; each file that yields nothing is a warning on stderr, and a named PATH that yields
no session exits 1."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from chat_history.errors import InvalidParams
from chat_history.policy.identity import normalize_uri
from chat_history.service import imports
from chat_history.service.manager import ChatHistoryManager
from chat_history.service.workspaces import named_workspace
from chat_history.wire.methods.imports import wire_import


def run(
    args: argparse.Namespace,
    manager: Callable[[], ChatHistoryManager],
    fail: Callable[[str], Exception],
) -> int:
    """The import of ``args.source``; ``fail`` builds the CLI's error from a message. Exit 1
    when a named PATH yielded no session (each file that yielded nothing is a warning)."""
    here = _current_folder()
    unread: list[imports.Unread] = []
    try:
        source = imports.check_source(args.source)
        root = Path(args.file).expanduser() if args.file else imports.data_folder(source)
        folder = None if args.file or args.all_projects else here
        planned = imports.import_sessions(
            manager(),
            imports.sessions_of(source, root, folder, here=here, unread=unread),
            args.workspace,
            dry_run=args.dry_run,
            default=normalize_uri(Path(here).as_uri()) if here else None,
        )
    except InvalidParams as exc:
        flag = {"source": "--from", "path": "PATH", "workspace": "--workspace"}.get(exc.field)
        raise fail(f"{flag or exc.field}: {exc.why}") from None
    for note in unread[:MAX_WARNINGS]:
        print(f"chat-history: warning: {note.path}: {note.why}", file=sys.stderr)
    if len(unread) > MAX_WARNINGS:
        more = len(unread) - MAX_WARNINGS
        print(f"chat-history: warning: {more:,} more file(s) yielded nothing", file=sys.stderr)
    failed = bool(args.file) and not planned
    if args.json:
        print(json.dumps(wire_import(planned, unread), indent=2, ensure_ascii=False))
    elif failed:
        print(f"chat-history: nothing imported: no {source} session in {root}", file=sys.stderr)
    elif not planned:
        where = f"{root} for {folder or 'any folder'}"
        print(f"No {source} sessions found in {where}.")
    else:
        _print(planned, dry_run=args.dry_run)
    _warn_about_age(planned)
    return 1 if failed else 0


def _current_folder() -> str | None:
    """The folder the command runs in (None: it was deleted under it)."""
    try:
        return str(Path.cwd())
    except OSError:
        return None


#: The warnings printed one by one (the rest are counted; ``--json`` lists every one).
MAX_WARNINGS = 20


def _print(planned: list[imports.PlannedImport], *, dry_run: bool) -> None:
    """Each session, what it adds and skips, where it goes, then the total."""
    for entry in planned:
        print(
            f"{entry.status:9}  {entry.conversation_id}  {entry.messages} message(s), "
            f"{entry.new_messages} new  [{entry.workspace}]  {entry.title or ''}"
        )
        if entry.beside is not None:
            print(
                f"           beside {entry.beside}, a conversation the import did not create "
                "(not merged)"
            )
        for skipped in entry.skipped:
            print(f"           skipped {skipped.count} {skipped.what}: {skipped.why}")
    current = sorted({e.workspace for e in planned if e.workspace_from == "current"})
    for workspace in current:
        print(
            f"The sessions that record no folder go into the current folder's workspace, "
            f"{workspace} (--workspace puts them elsewhere)."
        )
    added = sum(entry.new_messages for entry in planned)
    touched = sum(1 for entry in planned if entry.new_messages)
    verb = "Would import" if dry_run else "Imported"
    print(f"{verb} {added:,} message(s) into {touched:,} of {len(planned):,} conversation(s).")
    if dry_run:
        print("Dry run: nothing was written.")


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
        "--json",
        action="store_true",
        help="with --from: the answer as chatHistory/importFrom's (conversations, warnings)",
    )
    p.add_argument(
        "--all-projects",
        action="store_true",
        help="with --from and no PATH: every project's sessions, not only the current folder's",
    )
