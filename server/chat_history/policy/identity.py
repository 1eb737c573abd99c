"""Workspace identity (protocol.md "Version 3" → Workspace identity), the pure rules:

- ``normalize_uri``: a ``file:`` URI as one spelling per folder. Percent-encoded characters that
  need no encoding in a path are decoded (``%3A`` → ``:``), the remaining escapes are upper-case,
  a Windows drive letter is lower-case, the scheme is lower-case and there is no trailing ``/``:
  VS Code's ``file:///c%3A/Users/me/proj`` and Neovim's ``file:///C:/Users/me/proj/`` are one
  identity. Anything that is not a ``file:`` URI is kept as it is.
- ``request_workspace``: a request's ``workspace`` as an identity: normalized as above, and the
  session's own folder (in any spelling) names the session's identity, its ``repo:`` one in
  ``"repository"`` mode (a client that spells its folder out reads and writes the history its
  session does, never a second one beside it).
- ``normalize_remote``: a git remote URL as ``host/path`` (scheme, user, ``.git`` and trailing
  ``/`` dropped, host lower-case), so ``git@github.com:o/r.git`` and ``https://github.com/o/r``
  are one repository.
- ``repository_identity``: ``repo:`` + the normalized remote + ``/`` + the folder's path inside
  the repository (``/``-separated, empty at its root).
- ``moved_from``: which recorded identity a new one moved from (the fingerprint rule).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import attrs

#: Characters a path segment may hold without encoding (RFC 3986 unreserved, sub-delims, : @).
_PLAIN = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@"
)
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_DRIVE = re.compile(r"^/([A-Za-z])(:|%3[Aa])(?=/|$)")
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.*)$")

REPOSITORY_PREFIX = "repo:"


def _unescape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _PLAIN else f"%{match.group(1).upper()}"


def normalize_uri(uri: str) -> str:
    """One spelling of a folder's URI (see the module); other identities unchanged."""
    if uri[:5].lower() != "file:":
        return uri
    rest = uri[5:]
    authority = ""
    if rest.startswith("//"):
        end = rest.find("/", 2)
        authority, path = (rest[2:], "") if end < 0 else (rest[2:end], rest[end:])
        if authority.lower() == "localhost":
            authority = ""
    else:
        path = rest
    path = _ESCAPE.sub(_unescape, path)
    path = _DRIVE.sub(lambda m: f"/{m.group(1).lower()}:", path)
    while len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return f"file://{authority.lower()}{path}"


def request_workspace(named: str, identity: str, folder_identity: str) -> str:
    """The identity a request's ``workspace`` names in a session whose identity is ``identity``
    and whose normalized folder URI is ``folder_identity`` (see the module)."""
    workspace = normalize_uri(named)
    return identity if workspace == folder_identity else workspace


def folder_of(uri: str) -> str | None:
    """The local folder path a normalized ``file:`` URI names (None for other identities). A
    Windows drive path keeps its drive (``c:/Users/me``)."""
    if not uri.startswith("file://"):
        return None
    rest = uri[len("file://") :]
    slash = rest.find("/")
    if slash != 0:
        return None  # a UNC host: not a folder of this machine's file system as such
    path = re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), rest)
    if re.match(r"^/[a-z]:", path):
        return path[1:]
    return path or "/"


def normalize_remote(url: str) -> str:
    """A git remote URL as ``host/path``: one spelling per repository (see the module)."""
    text = url.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
        host, _, path = text.partition("/")
        host = host.rsplit("@", 1)[-1]
    else:
        scp = _SCP_LIKE.match(text)
        if scp is None:
            return text.rstrip("/").removesuffix(".git")
        host, path = scp.group(1), scp.group(2)
    host = host.lower()
    if host.endswith(":22") or host.endswith(":443"):
        host = host.rsplit(":", 1)[0]
    path = path.strip("/").removesuffix(".git").rstrip("/")
    return f"{host}/{path}" if path else host


def repository_identity(remote: str, inner_path: str) -> str:
    """``repo:`` + the normalized remote + ``/`` + the path inside the repository."""
    return f"{REPOSITORY_PREFIX}{normalize_remote(remote)}/{inner_path.strip('/')}"


@attrs.frozen
class Fingerprint:
    """What is recorded per identity of a local git working tree: the machine (a stable id kept
    beside the database), the folder's path, the normalized remote and the path inside it."""

    workspace: str
    machine: str
    folder: str
    remote: str | None
    inner_path: str
    recorded_at: int


def moved_from(
    current: Fingerprint,
    recorded: Iterable[Fingerprint],
    has_history: Callable[[str], bool],
    exists: Callable[[str], bool],
) -> Fingerprint | None:
    """The recorded identity whose history moves to ``current`` (which has none): on this
    machine, same remote and inner path, another folder that no longer exists, with history;
    the most recently recorded when several qualify. A folder that still exists never loses its
    history to another clone."""
    if current.remote is None:
        return None
    candidates = [
        record
        for record in recorded
        if record.workspace != current.workspace
        and record.machine == current.machine
        and record.remote == current.remote
        and record.inner_path == current.inner_path
        and record.folder != current.folder
        and not exists(record.folder)
        and has_history(record.workspace)
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda record: record.recorded_at)
