"""Workspace identity (protocol.md "Version 3" → Workspace identity), the pure rules:

- ``normalize_uri``: a ``file:`` URI as one spelling per folder. Each path segment is encoded
  exactly where it needs encoding: escapes of characters that need none are decoded (``%3A`` →
  ``:``), characters that need one are encoded (a space → ``%20``, ``é`` → ``%C3%A9``), escapes
  are upper-case; empty and ``.`` segments are dropped and ``..`` takes the previous segment away
  (``/a//./b/../c`` → ``/a/c``); a Windows drive letter is lower-case, the scheme is lower-case
  and there is no trailing ``/``: VS Code's ``file:///c%3A/Users/me/proj`` and Neovim's
  ``file:///C:/Users/me/proj/`` are one identity. Anything that is not a ``file:`` URI is kept as
  it is. ``folder_uri`` is the same spelling made from a local path (a symlinked folder is named
  by its target: the service resolves it, this module does no I/O).
- ``identity_problem``: the one bound on an identity's length (``MAX_IDENTITY_BYTES``), checked
  where an identity enters (``initialize``, a request's ``workspace``, an import).
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
- ``renamed_id``: the id a conversation takes when it is re-keyed into a workspace that holds
  its id already (two spellings of one folder written before version 3): both stay reachable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable
from urllib.parse import unquote

import attrs

from chat_history.errors import InvalidParams

#: Characters a path segment may hold without encoding (RFC 3986 unreserved, sub-delims, : @).
_PLAIN = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@"
)
#: Each byte as a segment spells it: itself when it needs no encoding, else ``%XX`` (upper-case).
_SPELLING = tuple(chr(b) if chr(b) in _PLAIN else f"%{b:02X}" for b in range(256))
_ESCAPES = re.compile(r"%([0-9A-Fa-f]{2})")
_DRIVE = re.compile(r"^[A-Za-z]:$")
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.*)$")

REPOSITORY_PREFIX = "repo:"
#: The longest workspace identity, in UTF-8 bytes once normalized (a request's ``workspace``, a
#: session's identity, an import's key): one bound for every way an identity enters, so that
#: whatever is stored exports and imports on both engines. PostgreSQL's btree entries hold at
#: most 2,704 bytes, and ``(owner, workspace, conversation, id)`` is one: beside a role name of
#: 63 bytes and the longest conversation id (256 characters of 4 bytes) 1,536 bytes fit.
MAX_IDENTITY_BYTES = 1_536


def _segment_bytes(segment: str) -> bytes:
    """A path segment's bytes: its escapes decoded, its characters in UTF-8 (a lone surrogate
    as the byte it stands for, as the file system's names decode, else as itself)."""
    parts = _ESCAPES.split(segment)
    out = bytearray()
    for index, part in enumerate(parts):
        if index % 2:
            out.append(int(part, 16))
            continue
        try:
            out += part.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            out += part.encode("utf-8", "surrogatepass")
    return bytes(out)


def _canonical_path(path: str) -> str:
    """A ``file:`` URI's path in its one spelling: each segment encoded exactly where it needs
    encoding (so ``%3A`` and ``:`` are one, and ``%20`` and a space, and ``%C3%A9`` and ``é``),
    empty and ``.`` segments dropped, ``..`` taking the previous one away (never the root or a
    drive), a drive letter lower-case, no trailing ``/``. Linear in the path's length."""
    segments: list[str] = []
    root = 0  # segments that ``..`` never removes (a drive)
    for raw in path.split("/"):
        spelled = "".join(_SPELLING[b] for b in _segment_bytes(raw))
        if spelled in ("", "."):
            continue
        if spelled == "..":
            if len(segments) > root:
                segments.pop()
            continue
        if not segments and _DRIVE.match(spelled):
            spelled, root = spelled.lower(), 1
        segments.append(spelled)
    return "/" + "/".join(segments)


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
    if authority and not path:
        return f"file://{authority.lower()}"
    return f"file://{authority.lower()}{_canonical_path(path)}"


def folder_uri(path: str) -> str:
    """The normalized ``file:`` URI of a local absolute path (``/home/me/proj``, ``c:/x``): a
    ``%`` in a name is a character, never an escape."""
    text = path.replace("\\", "/") if re.match(r"^[A-Za-z]:", path) else path
    text = text.replace("%", "%25")
    return normalize_uri("file://" + (text if text.startswith("/") else "/" + text))


def identity_problem(identity: str) -> str | None:
    """Why ``identity`` (normalized) cannot be a workspace identity, else None: longer than
    ``MAX_IDENTITY_BYTES`` in UTF-8 (a bound that keeps every key storable and importable)."""
    size = len(identity.encode("utf-8", "surrogatepass"))
    if size > MAX_IDENTITY_BYTES:
        return (
            f"names a workspace identity of {size:,} bytes once normalized "
            f"(at most {MAX_IDENTITY_BYTES:,} in UTF-8)"
        )
    return None


def checked_identity(named: str, field: str) -> str:
    """``named`` normalized, when the identity is within the bound; else InvalidParams ``field``
    (a request's ``workspace``, an import's key: whatever is stored exports and imports)."""
    identity = normalize_uri(named)
    problem = identity_problem(identity)
    if problem is not None:
        raise InvalidParams(field, problem)
    return identity


def checked_session_workspace(named: str, field: str) -> str:
    """A session's workspace as ``initialize`` names it (``field``: where it came from, as
    ``initialization_options.workspace`` or ``workspace_folders[0].uri``), returned as named when
    its identity is within the bound, else InvalidParams ``field``: the server refuses to start
    on it rather than store keys that no export could bring back."""
    checked_identity(named, field)
    return named


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
    path = unquote(rest, errors="surrogateescape")
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


#: The longest conversation id (protocol.py MAX_ID_CHARS).
_MAX_ID = 256


def renamed_id(conversation: str, taken: Container[str]) -> str:
    """A new id for ``conversation`` when it moves into a workspace that already holds that id:
    ``<id> (moved)``, else ``<id> (moved 2)``, … — the first not in ``taken``, at most
    ``_MAX_ID`` characters (the id's start is kept when it must be cut), so both histories stay
    reachable by the ids listed."""
    number = 1
    while True:
        suffix = " (moved)" if number == 1 else f" (moved {number})"
        candidate = conversation[: _MAX_ID - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        number += 1


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
