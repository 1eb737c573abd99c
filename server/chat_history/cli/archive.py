"""``export`` and ``import``: conversations written to stdout as JSONL in the export format of
``transfer.py``, and read back (rows already stored skipped); ``import --from`` hands another
tool's history to ``imports.py``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from chat_history.cli import imports as import_from
from chat_history.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    CliError,
    Subcommand,
    find_key,
    open_manager,
    reading,
    records,
)
from chat_history.cli.progress import Progress
from chat_history.cli.transfer import (
    ConversationImport,
    ImportFileError,
    conversation_lines,
    dumps,
    header_line,
    read_import,
)
from chat_history.errors import InvalidParams
from chat_history.service import branches, history, import_writes
from chat_history.service.workspaces import named_workspace
from chat_history.settings import default_settings
from chat_history.wire import protocol


def _write_lines(lines: Iterator[dict[str, Any]], sink: Any, progress: Progress) -> None:
    for line in lines:
        sink.write((dumps(line) + "\n").encode("utf-8"))
        if line["type"] == "message":
            progress.advance()


def cmd_export(args: argparse.Namespace) -> int:
    """``export``: the conversations (all, or those named) as JSONL on stdout, in the export format
    of ``cli/transfer.py``: each one's active path, or with ``--tree`` every branch."""
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
            if args.tree:
                whole = branches.whole_tree(manager, key)
                lines = conversation_lines(
                    key, whole.rows, whole.summary, tree=True, active_leaf_id=whole.active_leaf_id
                )
            else:
                result = history.get(manager, key)
                lines = conversation_lines(key, result.messages, result.summary)
            _write_lines(lines, sink, progress)
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
                if entry.tree is not None and not entry.tree.is_line:
                    result = import_writes.import_tree(
                        manager, entry.key, entry.tree, entry.summary
                    )
                else:
                    result = import_writes.import_conversation(
                        manager, entry.key, entry.messages, entry.summary
                    )
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


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("conversations", nargs="*", metavar="CONVERSATION", help="default: all")
    p.add_argument("--workspace", metavar="W", type=named_workspace, help="only this workspace")
    p.add_argument(
        "--tree",
        action="store_true",
        help="every branch of each conversation, each message with its parentId, and the active "
        "leaf (default: the active path, as a line)",
    )


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file", metavar="FILE", nargs="?", help="the .jsonl file (- for stdin), or with --from PATH"
    )
    import_from.add_arguments(p)


EXPORT = Subcommand(cmd_export, _export_arguments)
IMPORT = Subcommand(cmd_import, _import_arguments)
