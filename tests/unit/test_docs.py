"""The documentation refers only to files in the repository, its settings table is current, and
docs/architecture.md's layout lists every module of the package once."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MD_MENTION = re.compile(r"(?<![\w/.-])((?:\.\.?/)?[\w./-]*\w\.md)\b")
PACKAGE = ROOT / "server" / "chat_history"


def _documents(root: Path = ROOT) -> list[Path]:
    """Every markdown file git tracks (or would track) outside dependencies and caches; in a
    tree without ``.git`` (a release tarball), the tree walked with ``.gitignore``'s exclusions."""
    if (root / ".git").exists():
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    else:
        out = _walked(root)
    return sorted(root / p for p in out if "node_modules" not in p and (root / p).is_file())


def _ignore_patterns(root: Path) -> list[str]:
    gitignore = root / ".gitignore"
    if not gitignore.is_file():
        return []
    lines = gitignore.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _ignored(relative: str, is_dir: bool, patterns: list[str]) -> bool:
    """``.gitignore``'s rules as this repository writes them: a name or glob matches any path
    component, one with an inner ``/`` is anchored at the root, a trailing ``/`` only folders."""
    name = relative.rsplit("/", 1)[-1]
    for pattern in patterns:
        folder_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        if folder_only and not is_dir:
            continue
        if "/" in pattern:
            if fnmatch.fnmatchcase(relative, pattern.lstrip("/")):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def _walked(root: Path) -> list[str]:
    """The ``*.md`` files under ``root``, relative, skipping what ``.gitignore`` excludes."""
    patterns = _ignore_patterns(root)
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        dirs[:] = [d for d in dirs if d != ".git" and not _ignored(prefix + d, True, patterns)]
        found += [
            prefix + f
            for f in files
            if f.endswith(".md") and not _ignored(prefix + f, False, patterns)
        ]
    return found


def test_the_documents_are_found_in_a_tree_without_git(tmp_path: Path) -> None:
    """A release tarball has no ``.git``: the walk finds what git lists, and the link checks
    run there (``git archive HEAD | tar -x`` as the release does)."""
    tracked = {p.relative_to(ROOT).as_posix() for p in _documents(ROOT)}
    copy = tmp_path / "release"
    if (ROOT / ".git").exists():
        copy.mkdir()
        archive = subprocess.run(
            ["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x"], cwd=copy, input=archive, check=True)
        committed = set(
            subprocess.run(
                ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout.split()
        )
    else:  # this very test running in a release tree: the copy is the tree itself
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", "node_modules"))
        committed = tracked
    (copy / "node_modules").mkdir()
    (copy / "node_modules" / "README.md").write_text("# not ours\n", encoding="utf-8")
    (copy / ".venv" / "lib").mkdir(parents=True)
    (copy / ".venv" / "lib" / "NOTES.md").write_text("# not ours\n", encoding="utf-8")
    assert not (copy / ".git").exists()
    walked = {p.relative_to(copy).as_posix() for p in _documents(copy)}
    assert walked == committed
    assert committed <= tracked  # in the working tree, git also lists files not yet committed


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


def layout_entries(text: str) -> list[str]:
    """The paths the "Layout" block of docs/architecture.md lists, relative to the package, in
    its order: a folder as ``name/``, each name of a line of several (``a.py, b.py``)."""
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: list[str] = []
    folders: list[str] = []  # the folder open at each depth
    for line in block.splitlines():
        if not line.startswith("  "):
            continue  # the package's own line
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]  # the description follows
        del folders[depth:]
        entries += ["".join(folders) + name for name in names.split(", ")]
        if names.endswith("/"):
            folders.append(names)
    return entries


def layout_problems(entries: list[str], package: Path) -> list[str]:
    """What the layout gets wrong about ``package``: a module or folder listed never or more
    than once (a folder's ``__init__.py`` is listed by the folder's line, or once beside it),
    an entry the tree does not have."""
    modules = {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
    folders = {
        "/".join(m.split("/")[:i]) + "/" for m in modules for i in range(1, m.count("/") + 1)
    }
    counts = Counter(entries)
    problems = []
    for path in sorted(modules | folders):
        inner_init = path.endswith("/__init__.py")
        if counts[path] != 1 and not (inner_init and counts[path] == 0):
            problems.append(f"{path} listed {counts[path]} times")
    problems += [f"{path} is not in the tree" for path in counts if not (package / path).exists()]
    return problems


# Issue 40: modules are moving (service/, policy/, wire/, store/, importers/) while this test is
# written. The lead drops this mark once the layout is brought up to date after the merges:
# strict, so the first run where the layout is right fails until the mark goes.
def test_the_layout_lists_every_module_of_the_package_once() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert layout_problems(layout_entries(text), PACKAGE) == []


def test_the_layout_checker_sees_a_missing_a_doubled_and_a_stale_module(tmp_path: Path) -> None:
    for name in ("__init__.py", "a.py", "room/__init__.py", "room/b.py", "room/c.py", "z.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    right = (
        "## Layout\n\n```\npkg/\n  __init__.py   the version\n  a.py\n"
        "  room/         a room\n    b.py, c.py  b and c\n  z.py          z\n```\n"
    )
    assert layout_entries(right) == [
        "__init__.py",
        "a.py",
        "room/",
        "room/b.py",
        "room/c.py",
        "z.py",
    ]
    assert layout_problems(layout_entries(right), tmp_path) == []
    wrong = right.replace("a.py\n", "a.py, gone.py\n").replace("b.py, c.py", "b.py, b.py")
    assert layout_problems(layout_entries(wrong), tmp_path) == [
        "room/b.py listed 2 times",
        "room/c.py listed 0 times",
        "gone.py is not in the tree",
    ]
