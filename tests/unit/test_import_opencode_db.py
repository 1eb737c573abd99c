"""OpenCode's SQLite database (importers/opencode/database.py) read like its storage tree: a
database built here from a hand-written schema in the shape of OpenCode's own tables (session,
message, part: tests/fixtures/imports/SOURCES.md), filled with the tree fixture's sessions, reads
into the same rows as the tree (one place for each mapping rule); a session in both is read from
the database; importing again adds nothing; the file is opened read-only and left as it was; a
locked file, a file that is not a database and a schema without a column read here are errors
naming the file; every session formats to a body each provider kind's SDK accepts."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from import_fixtures import manager
from test_import_readers import assert_every_provider_accepts
from tests.opencode_db import PART_DATA, SCHEMA, build

from chat_history.errors import InvalidParams
from chat_history.importers.common import Session
from chat_history.importers.opencode.database import sessions
from chat_history.providers import KINDS
from chat_history.service import imports
from chat_history.service.manager import ChatHistoryManager

STORAGE = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "opencode" / "storage"
MAIN = "ses_6a1b2c3d4e5fAbCdEf012345"
CHILD = "ses_6a1b2c3d4e60ChildSess0001"


__all__ = ["manager"]  # the fixture, imported for pytest


def by_id(root: Path) -> dict[str, tuple[Path, Session]]:
    return {s.session_id: (p, s) for p, s in imports.sessions_of("opencode", root, None)}


def test_a_database_reads_into_the_rows_its_tree_gives(tmp_path: Path) -> None:
    database = build(tmp_path / "opencode" / "opencode.db")
    read = by_id(tmp_path / "opencode")
    tree = by_id(STORAGE)
    assert sorted(read) == sorted(tree) == sorted([MAIN, CHILD])
    for sid, (path, session) in read.items():
        assert path == database
        assert session == tree[sid][1]  # rows, times, title, folder and skipped counts alike
    assert read[MAIN][1].folder == "/home/me/shop" and len(read[MAIN][1].messages) == 7


def test_a_session_in_the_database_and_the_tree_is_read_from_the_database(
    tmp_path: Path,
) -> None:
    data = tmp_path / "share" / "opencode"
    shutil.copytree(STORAGE, data / "storage")
    database = build(data / "opencode.db")
    found = list(imports.sessions_of("opencode", data, "/home/me/shop"))
    assert sorted((p, s.session_id) for p, s in found) == [(database, MAIN), (database, CHILD)]
    assert imports.data_folder("opencode", {"HOME": "/h", "XDG_DATA_HOME": str(tmp_path)}) == (
        tmp_path / "opencode"
    )


def test_importing_from_the_database_again_adds_nothing_and_leaves_the_file_as_it_was(
    tmp_path: Path, manager: ChatHistoryManager
) -> None:
    database = build(tmp_path / "opencode" / "opencode.db")
    before = database.read_bytes()
    runs = [
        imports.import_sessions(
            manager, imports.sessions_of("opencode", database, None), None, dry_run=False
        )
        for _ in range(2)
    ]
    assert sorted((p.status, p.new_messages) for p in runs[0]) == [("new", 2), ("new", 7)]
    assert sorted((p.status, p.new_messages) for p in runs[1]) == [("unchanged", 0)] * 2
    assert database.read_bytes() == before
    assert sorted(p.name for p in database.parent.iterdir()) == ["opencode.db"]  # no journal


def test_a_locked_database_is_an_error_naming_it(tmp_path: Path) -> None:
    database = build(tmp_path / "opencode" / "opencode.db")
    writer = sqlite3.connect(database, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")  # OpenCode in the middle of a write
        with pytest.raises(InvalidParams) as caught:
            list(imports.sessions_of("opencode", database, None))
    finally:
        writer.close()
    assert caught.value.field == "path"
    assert caught.value.why == f"{database}: cannot be read (database is locked)"


def test_a_file_that_is_not_a_database_or_a_schema_without_a_column_read_is_an_error(
    tmp_path: Path,
) -> None:
    junk = tmp_path / "opencode" / "opencode.db"
    junk.parent.mkdir()
    junk.write_bytes(b"not a database at all, only text" * 200)
    with pytest.raises(InvalidParams) as caught:
        list(imports.sessions_of("opencode", junk, None))
    assert caught.value.why == f"{junk}: cannot be read (file is not a database)"
    newer = build(
        tmp_path / "newer" / "opencode.db",
        SCHEMA.replace(PART_DATA, "  body text NOT NULL\n);\nCREATE INDEX"),
    )
    with pytest.raises(InvalidParams) as caught:
        list(imports.sessions_of("opencode", newer, None))
    assert caught.value.why == (
        f"{newer}: not an OpenCode database this reader knows (table part has no data)"
    )


def test_a_schema_without_the_session_folder_takes_the_projects(tmp_path: Path) -> None:
    schema = SCHEMA.replace("directory text NOT NULL, ", "")
    database = build(tmp_path / "opencode" / "opencode.db", schema)
    read = by_id(database)
    assert {s.folder for _, s in read.values()} == {"/home/me/shop"}
    assert read[MAIN][1].messages == by_id(STORAGE)[MAIN][1].messages


def test_a_session_whose_rows_add_up_past_the_bound_is_an_error_naming_it(tmp_path: Path) -> None:
    database = build(tmp_path / "opencode" / "opencode.db")
    with pytest.raises(InvalidParams) as caught:
        list(sessions(database, 2_000))
    assert caught.value.field == "path"
    assert caught.value.why.startswith(f"{database}: session ses_")


def database_sessions(tmp: Path) -> dict[str, Session]:
    return {sid: s for sid, (_, s) in by_id(build(tmp / "opencode.db")).items()}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", [MAIN, CHILD])
def test_every_database_session_formats_to_a_body_each_provider_accepts(
    kind: str, name: str, tmp_path: Path
) -> None:
    assert_every_provider_accepts(kind, database_sessions(tmp_path)[name])
