"""Where several tools keep their data and how their folders compare: VS Code's ``User`` folder on
each platform (Copilot Chat, Cline, Roo Code), and a folder in one spelling whether a tool
recorded a path or a ``file:`` URI."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from chat_history.policy.identity import normalize_uri


def vscode_user(env: Mapping[str, str], home: Path) -> Path:
    """VS Code's ``User`` folder (stable builds) on this platform."""
    if sys.platform == "win32":
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming") / "Code" / "User"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Code" / "User"
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "Code" / "User"


def folder_key(folder: str) -> str:
    """A folder (a path or a ``file:`` URI) in one spelling, to compare two."""
    if "://" in folder:
        return normalize_uri(folder)
    if not os.path.isabs(folder):
        return folder
    return normalize_uri(Path(os.path.normpath(folder)).as_uri())


def same_folder(folder: str) -> str:
    """A path in one spelling on this platform (case and separators), to compare two."""
    return os.path.normcase(os.path.normpath(folder))
