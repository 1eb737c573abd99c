"""The documentation refers only to files in the repository, and its settings table is current."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MD_MENTION = re.compile(r"(?<![\w/.-])((?:\.\.?/)?[\w./-]*\w\.md)\b")


def _documents() -> list[Path]:
    """Every markdown file git tracks (or would track) outside dependencies and caches."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / p for p in out if "node_modules" not in p and (ROOT / p).is_file()]


def _targets(doc: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for match in LINK.finditer(line):
            found.append((number, match.group(1)))
    return found


def test_every_relative_link_names_a_file_in_the_repository() -> None:
    broken = []
    for doc in _documents():
        for number, target in _targets(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not (doc.parent / path).exists():
                broken.append(f"{doc.relative_to(ROOT)}:{number}: {target}")
    assert broken == []


def test_every_mentioned_markdown_file_exists() -> None:
    names = {p.name for p in _documents()}
    missing = []
    for doc in _documents():
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for match in MD_MENTION.finditer(line):
                mention = match.group(1)
                if "/" in mention:
                    ok = (doc.parent / mention).exists() or (ROOT / mention).exists()
                else:
                    ok = mention in names
                if not ok:
                    missing.append(f"{doc.relative_to(ROOT)}:{number}: {mention}")
    assert missing == []


def test_the_checker_sees_a_broken_link(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("see [the guide](missing/guide.md) and [web](https://example.org)\n")
    assert [t for _, t in _targets(doc)] == ["missing/guide.md", "https://example.org"]
    assert not (doc.parent / "missing/guide.md").exists()


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_settings", ROOT / "docs" / "gen_settings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_table_is_generated_from_the_schema() -> None:
    gen = _generator()
    assert gen.main(["--check"]) == 0, "docs/settings.md is stale: run python docs/gen_settings.py"


def test_the_settings_table_names_every_key_with_its_default() -> None:
    gen = _generator()
    schema = json.loads((ROOT / "settings.schema.json").read_text(encoding="utf-8"))
    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    for key, spec in schema["properties"].items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key}` |"))
        assert f"`{json.dumps(spec.get('default'), ensure_ascii=False)}`" in row
    changed = dict(schema, properties={"chatHistory.x": {"type": "integer", "default": 3}})
    assert gen.render(text, changed) != text
