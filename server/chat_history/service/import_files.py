"""Where each tool keeps its sessions (its data folder on this machine, its own environment
variables first), which of its files belong to a project folder, the session id a file's path
gives, and the folder of sessions whose files record none (Gemini CLI's ``projects.json``, VS
Code's ``workspace.json``). Reading and writing are ``service.imports``'s."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

from chat_history.errors import InvalidParams
from chat_history.importers import READERS, SOURCES, Session, cline, roo_code
from chat_history.importers.claude_code import project_folder_name
from chat_history.importers.codex import session_id_of
from chat_history.importers.common import timestamp_ms
from chat_history.importers.copilot_chat import workspace_folder
from chat_history.policy.identity import normalize_uri

#: The VS Code extensions that keep tasks (Cline, Roo Code), by source.
TASK_EXTENSIONS = {cline.SOURCE: cline.EXTENSION, roo_code.SOURCE: roo_code.EXTENSION}
TASK_FILE = "api_conversation_history.json"


def unsupported(source: str) -> str:
    """Why ``source`` is refused."""
    if source in SOURCES:
        return f"reading this source is not supported yet; supported: {', '.join(READERS)}"
    return f"must be one of {', '.join(SOURCES)}"


def data_folder(source: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``source`` keeps its sessions on this machine (its own environment variables
    first, as the tool reads them)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())
    if source == "claude-code":
        base = env.get("CLAUDE_CONFIG_DIR")
        return (Path(base) if base else home / ".claude") / "projects"
    if source == "codex":
        base = env.get("CODEX_HOME")
        return (Path(base) if base else home / ".codex") / "sessions"
    if source == "gemini-cli":
        base = env.get("GEMINI_CLI_HOME")
        return (Path(base) if base else home) / ".gemini" / "tmp"
    if source == "copilot-chat":
        return _vscode_user(env, home) / "workspaceStorage"
    if source == "continue":
        base = env.get("CONTINUE_GLOBAL_DIR")
        return (Path(base) if base else home / ".continue") / "sessions"
    if source in TASK_EXTENSIONS:
        return _vscode_user(env, home) / "globalStorage" / TASK_EXTENSIONS[source] / "tasks"
    if source == "copilot-cli":  # session-state/ and the older history-session-state/
        base = env.get("COPILOT_HOME")
        return Path(base) if base else home / ".copilot"
    if source == "opencode":  # opencode.db (2026 builds) and the older storage/ tree
        data = env.get("XDG_DATA_HOME")
        return (Path(data) if data else home / ".local" / "share") / "opencode"
    raise InvalidParams("source", unsupported(source))


def _vscode_user(env: Mapping[str, str], home: Path) -> Path:
    """VS Code's ``User`` folder (stable builds) on this platform."""
    if sys.platform == "win32":
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming") / "Code" / "User"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Code" / "User"
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "Code" / "User"


def session_files(source: str, root: Path, folder: str | None) -> list[Path]:
    """The session files of ``source`` under ``root`` (a file: itself), those of the project
    ``folder`` only when given (Claude Code keeps them per project; Codex records each session's
    folder inside the file, checked by the caller after reading)."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    if source == "claude-code":
        base = root / project_folder_name(folder) if folder and root.name == "projects" else root
        if not base.is_dir():
            return []
        return sorted({*base.glob("*.jsonl"), *base.glob("*/subagents/agent-*.jsonl")})
    if source == "gemini-cli":
        return gemini_files(root, folder)
    if source == "copilot-chat":
        return copilot_files(root, folder)
    if source == "continue":
        return sorted(p for p in root.glob("*.json") if p.name != "sessions.json")
    if source == "opencode":
        return opencode_files(root)
    if source == "copilot-cli":
        return copilot_cli_files(root)
    if source in TASK_EXTENSIONS:
        own = root / TASK_FILE
        return [own] if own.is_file() else sorted(root.glob(f"*/{TASK_FILE}"))
    return sorted(root.rglob("rollout-*.jsonl"))


def opencode_files(root: Path) -> list[Path]:
    """OpenCode's databases (``opencode.db``, ``opencode-<channel>.db``) under ``root`` (its data
    folder), then the session files of its older storage tree (``root`` or ``root/storage``):
    a session in both is read from the database (the caller keeps the first of an id)."""
    tree = root if (root / "session").is_dir() else root / "storage"
    databases = sorted(p for p in root.glob("opencode*.db") if p.is_file())
    return [*databases, *sorted(tree.glob("session/*/*.json"))]


def copilot_cli_files(root: Path) -> list[Path]:
    """Copilot CLI's sessions under ``root`` (``~/.copilot``, ``session-state``, one session's
    folder, or ``history-session-state``): the event logs first, then the older single-file
    sessions (a session in both is read from its event log: the caller keeps the first of an
    id)."""
    own = root / "events.jsonl"
    if own.is_file():
        return [own]
    state = root / "session-state" if (root / "session-state").is_dir() else root
    older = root / "history-session-state" if (root / "history-session-state").is_dir() else root
    logs = sorted(state.glob("*/events.jsonl"))
    return [*logs, *sorted(p for p in older.glob("session_*.json") if p.is_file())]


def copilot_files(root: Path, folder: str | None) -> list[Path]:
    """VS Code's chat session files under ``root`` (``workspaceStorage``, one workspace's folder
    or its ``chatSessions``): when ``root`` is ``workspaceStorage`` and ``folder`` is given, those
    of the workspaces whose ``workspace.json`` names that folder."""
    if root.name == "chatSessions":
        chats = [root]
    elif (root / "chatSessions").is_dir():
        chats = [root / "chatSessions"]
    else:
        wanted = normalize_uri(Path(folder).as_uri()) if folder else None
        chats = [
            ws / "chatSessions"
            for ws in sorted(root.iterdir())
            if ws.is_dir() and (wanted is None or _copilot_folder(ws) == wanted)
        ]
    found = {p for c in chats for pattern in ("*.json", "*.jsonl") for p in c.glob(pattern)}
    return sorted(path for path in found if path.is_file())


def _copilot_folder(workspace: Path) -> str | None:
    """The normalized folder URI a VS Code workspace storage folder belongs to."""
    try:
        uri = workspace_folder((workspace / "workspace.json").read_text(encoding="utf-8"))
    except OSError:
        return None
    return normalize_uri(uri) if uri else None


def gemini_files(root: Path, folder: str | None) -> list[Path]:
    """Gemini CLI's session files under ``root`` (its ``tmp`` folder, a project's folder or a
    ``chats`` folder): when ``root`` is ``tmp`` and ``folder`` is given, that project's only
    (the folder's SHA-256, or its name in ``projects.json``)."""
    if root.name == "tmp":
        if folder:
            names = {hashlib.sha256(folder.encode()).hexdigest(), *_gemini_names(root, folder)}
            projects = [root / name for name in sorted(names)]
        else:
            projects = [path for path in root.iterdir() if path.is_dir()]
        chats = [project / "chats" for project in projects]
    else:
        chats = [root] if root.name == "chats" else [root / "chats"]
    found: set[Path] = set()
    for folder_of_chats in chats:
        for pattern in ("session-*.json", "session-*.jsonl", "*/*.jsonl"):
            found.update(folder_of_chats.glob(pattern))
    return sorted(path for path in found if path.is_file())


def _gemini_projects(tmp: Path) -> dict[str, str]:
    """``projects.json`` beside ``tmp``: folder → the name of its folder under ``tmp``."""
    try:
        value = json.loads((tmp.parent / "projects.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    projects = value.get("projects") if isinstance(value, dict) else None
    if not isinstance(projects, dict):
        return {}
    return {k: v for k, v in projects.items() if isinstance(k, str) and isinstance(v, str)}


def _gemini_names(tmp: Path, folder: str) -> list[str]:
    wanted = same_folder(folder)
    return [name for path, name in _gemini_projects(tmp).items() if same_folder(path) == wanted]


def _gemini_folder(path: Path) -> str | None:
    """The project folder of a Gemini CLI session file: the folder ``projects.json`` names, or
    whose SHA-256 is the name of the file's project folder (None: neither is known)."""
    for parent in path.parents:
        if parent.parent.name == "tmp" and (parent / "chats").is_dir():
            for folder, name in _gemini_projects(parent.parent).items():
                if parent.name in {name, hashlib.sha256(folder.encode()).hexdigest()}:
                    return folder
            return None
    return None


def session_id(source: str, path: Path) -> str:
    if source == "claude-code" and path.parent.name == "subagents":
        return f"{path.parent.parent.name}/{path.stem}"
    if source == "codex":
        return session_id_of(path.name)
    if source == "gemini-cli" and path.parent.name != "chats":
        return f"{path.parent.name}/{path.stem}"  # a sub-agent's file
    if source == "copilot-cli" and path.suffix == ".json":
        return copilot_cli_id(path.stem)
    if source in TASK_EXTENSIONS or source == "copilot-cli":
        return path.parent.name  # the task's or the session's folder
    return path.stem


def copilot_cli_id(stem: str) -> str:
    """The session id in an older Copilot CLI file's name, ``session_<id>_<epoch ms>``."""
    core = stem.removeprefix("session_")
    head, _, tail = core.rpartition("_")
    return head if head and tail.isdigit() else core


def placed(source: str, path: Path, sessions: list[Session], folder: str | None) -> list[Session]:
    """Gemini CLI's and VS Code's sessions record no folder: the project folder they were found
    for, else the one ``projects.json`` (Gemini) or ``workspace.json`` (VS Code, a URI) names."""
    if source == "gemini-cli":
        where = folder or _gemini_folder(path)
    elif source == "copilot-chat":
        where = folder or _copilot_folder(path.parent.parent)
    elif source == "continue":
        return [_timed(s, path) for s in sessions]
    else:
        return sessions
    return [attrs.evolve(s, folder=where) if s.folder is None else s for s in sessions]


def _timed(session: Session, path: Path) -> Session:
    """A Continue session's rows at its ``dateCreated`` in ``sessions.json`` (no message of
    Continue records its time); InvalidParams ``path`` naming the file when it has none."""
    try:
        index = json.loads((path.parent / "sessions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        index = []
    created = next(
        (
            entry.get("dateCreated")
            for entry in (index if isinstance(index, list) else [])
            if isinstance(entry, dict) and entry.get("sessionId") == session.session_id
        ),
        None,
    )
    at = timestamp_ms(int(created) if isinstance(created, str) and created.isdigit() else created)
    if at is None:
        raise InvalidParams("path", f"{path}: sessions.json beside it gives this session no time")
    rows = tuple(m if m.timestamp else attrs.evolve(m, timestamp=at) for m in session.messages)
    return attrs.evolve(session, messages=rows)


def folder_key(folder: str) -> str:
    """A folder (a path or a ``file:`` URI) in one spelling, to compare two."""
    if "://" in folder:
        return normalize_uri(folder)
    if not os.path.isabs(folder):
        return folder
    return normalize_uri(Path(os.path.normpath(folder)).as_uri())


def same_folder(folder: str) -> str:
    return os.path.normcase(os.path.normpath(folder))
