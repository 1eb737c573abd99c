"""The registry of import sources (importers/__init__.py): every module that declares an
``IMPORTER`` is in it, in the spec's order (the shim's ``IMPORT_SOURCES``, read here: one list
to keep), and documented; a name not in it is refused naming every source; and a source the
service has never heard of — declared here, registered, nothing else — is found, bounded, read,
filtered by project and written by the service's import, which is what adding a source takes
(docs/imports.md, "Adding a source")."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest
from import_fixtures import manager

from chat_history import importers
from chat_history.errors import InvalidParams
from chat_history.importers import IMPORTERS, SOURCES, Importer, Session, importer
from chat_history.model import Message
from chat_history.service import imports
from chat_history.service.manager import ChatHistoryManager

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "imports.md"
#: The shim's list of sources (protocol.md "History from other tools": ``SOURCE``, in its order).
SHIM_SOURCES = ROOT / "client-shim" / "src" / "types" / "imports.ts"


__all__ = ["manager"]  # the fixture, imported for pytest


def shim_sources() -> tuple[str, ...]:
    """The shim's ``IMPORT_SOURCES``, as its source file writes them."""
    found = re.search(r"IMPORT_SOURCES = \[(.*?)\] as const;", SHIM_SOURCES.read_text(), re.S)
    assert found is not None, f"no IMPORT_SOURCES list in {SHIM_SOURCES}"
    return tuple(re.findall(r'"([^"]+)"', found.group(1)))


def test_every_module_declaring_an_importer_is_registered_in_the_specs_order() -> None:
    declared: dict[str, Importer] = {}
    for info in pkgutil.walk_packages(importers.__path__, "chat_history.importers."):
        found = getattr(importlib.import_module(info.name), "IMPORTER", None)
        if isinstance(found, Importer):
            declared[found.source] = found
    assert sorted(declared) == sorted(SOURCES)
    assert all(IMPORTERS[source] is found for source, found in declared.items())
    assert shim_sources() == SOURCES  # the spec's order, as the shim's clients see it


def test_every_source_has_its_row_in_the_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("## Sources") : text.index("### Claude Code")]
    rows = [line.split(" | ")[0] for line in table.splitlines() if line.startswith("| `")]
    assert [s for s in SOURCES if not any(f"`{s}`" in row for row in rows)] == []


def test_a_source_not_registered_is_refused_naming_every_source() -> None:
    with pytest.raises(InvalidParams) as caught:
        importer("Claude-Code")
    assert (caught.value.field, caught.value.why) == (
        "source",
        f"must be one of {', '.join(SOURCES)}",
    )


def _toy_read(data: bytes, session_id: str) -> list[Session]:
    """A made-up tool's session file: ``{"cwd", "turns": [[role, text], …]}``."""
    value = json.loads(data)
    rows = tuple(
        Message(role=role, content=text, timestamp=1_700_000_000_000 + n)
        for n, (role, text) in enumerate(value["turns"])
    )
    return [Session("toy", session_id, value["cwd"], None, rows, ())]


TOY = Importer(
    source="toy",
    read=_toy_read,
    locate=lambda env, home: Path(env.get("TOY_HOME") or home / ".toy"),
    discover=lambda root, folder: sorted(root.glob("*.toy")),
    folder_inside=True,
)


def test_a_source_the_service_never_heard_of_imports_through_its_importer_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manager: ChatHistoryManager
) -> None:
    monkeypatch.setitem(IMPORTERS, "toy", TOY)
    home = tmp_path / ".toy"
    home.mkdir()
    for name, cwd in (("a", "/home/me/shop"), ("b", "/home/me/other")):
        turns = [["user", f"hello from {name}"], ["assistant", "hi"]]
        (home / f"{name}.toy").write_text(json.dumps({"cwd": cwd, "turns": turns}))
    (home / "notes.txt").write_text("not a session")
    assert imports.check_source("toy") == "toy"
    assert imports.data_folder("toy", {"HOME": str(tmp_path)}) == home
    assert imports.data_folder("toy", {"HOME": "/h", "TOY_HOME": "/t"}) == Path("/t")
    every = [(p.name, s.conversation_id) for p, s in imports.sessions_of("toy", home, None)]
    assert every == [("a.toy", "toy:a"), ("b.toy", "toy:b")]
    runs = [
        imports.import_sessions(
            manager, imports.sessions_of("toy", home, "/home/me/shop"), None, dry_run=False
        )
        for _ in range(2)
    ]
    assert [(p.conversation_id, p.workspace, p.status, p.new_messages) for p in runs[0]] == [
        ("toy:a", "file:///home/me/shop", "new", 2)
    ]
    assert [(p.status, p.new_messages) for p in runs[1]] == [("unchanged", 0)]
    monkeypatch.setattr(imports, "MAX_FILE_BYTES", 40)  # the service's bound, for every source
    with pytest.raises(InvalidParams) as caught:
        list(imports.sessions_of("toy", home, None))
    assert caught.value.why == f"{home / 'a.toy'}: larger than 0 MiB, not read"
