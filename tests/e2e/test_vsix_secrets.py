"""The .vsix's secret scan (packaging/vsix.py): vsce's own secretlint rules over the files this
project writes, so that vsce need not read every third-party library and binary of the payload
(40-200 s per .vsix here). A secret in our files still stops the build; the same text in a
third-party library's file is not read."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def vsix() -> ModuleType:
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        spec = importlib.util.spec_from_file_location("vsix_script", ROOT / "packaging" / "vsix.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "packaging"))


#: A GitHub token's shape, made at run time so the repository holds none.
TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"


def stage(folder: Path, secret_at: str | None) -> Path:
    for name, text in {
        "package.json": "{}",
        "dist/extension.js": "exports.activate = () => {};\n",
        "bundled/boot.py": "print('boot')\n",
        "bundled/libs/chat_history/__init__.py": "",
        "bundled/libs/somelib/__init__.py": "",
        "server/chat-history-server": "binary",
    }.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if secret_at is not None:
        (folder / secret_at).write_text(f'TOKEN = "{TOKEN}"\n')
    return folder


def test_the_scan_reads_our_files_only(tmp_path: Path) -> None:
    names = {str(p.relative_to(tmp_path)) for p in vsix().own_files(stage(tmp_path, None))}
    assert names == {
        "package.json",
        "dist/extension.js",
        "bundled/boot.py",
        "bundled/libs/chat_history/__init__.py",
    }


@pytest.mark.parametrize(
    "where", ["dist/extension.js", "bundled/boot.py", "bundled/libs/chat_history/__init__.py"]
)
def test_a_secret_in_our_files_stops_the_build(tmp_path: Path, where: str) -> None:
    with pytest.raises(SystemExit, match="secrets found") as refused:
        vsix().scan_secrets(stage(tmp_path, where))
    assert "GitHub" in str(refused.value) and Path(where).name in str(refused.value)


def test_a_clean_stage_passes_and_third_party_files_are_not_read(tmp_path: Path) -> None:
    assert vsix().scan_secrets(stage(tmp_path, "bundled/libs/somelib/__init__.py")) == 4
