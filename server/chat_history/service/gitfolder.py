"""What a workspace folder is in git, read from the repository's own files (no ``git`` process):
the working tree that holds it, its ``origin`` remote's URL (else the first remote's) and the
folder's path inside the tree. Linked worktrees (``.git`` as a file naming the git folder, with a
``commondir``) share the main repository's config; ``worktrees`` lists a repository's trees (the
ACP history view's ``includeWorktrees``).

Whatever is in those files cannot break a request: each file is read up to a size bound and must
be UTF-8 without NUL characters, the config is parsed line by line in linear time (no regular
expression that backtracks), and a remote URL longer than ``MAX_REMOTE_CHARS`` is no remote. An
unreadable or hostile ``.git`` (a bad ``gitdir:``, a symlink loop, undecodable bytes, a file too
large) means the folder has no fingerprint: ``git_folder`` answers None, never an exception."""

from __future__ import annotations

from pathlib import Path

import attrs

#: The most of ``.git`` (a file) and ``commondir`` read: each holds one path.
MAX_POINTER_BYTES = 16 * 1024
#: The most of a repository's ``config`` read (git's own are a few hundred bytes).
MAX_CONFIG_BYTES = 1024 * 1024
#: The longest remote URL taken as one (a longer one is no remote: identities stay bounded).
MAX_REMOTE_CHARS = 2_048
#: The most linked worktrees ``worktrees`` reads (the first by name).
MAX_WORKTREES = 8


@attrs.frozen
class GitFolder:
    #: the working tree's top folder
    top: Path
    #: the remote's URL as configured (None: the repository has no remote)
    remote: str | None
    #: the folder's path inside the working tree, ``/``-separated ("" at its top)
    inner_path: str


class _Hostile(Exception):
    """A git file that cannot be read as git writes it (the folder gets no fingerprint)."""


def _read(path: Path, limit: int) -> str:
    """``path``'s text: at most ``limit`` bytes, UTF-8, no NUL; else _Hostile."""
    with path.open("rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit or b"\0" in data:
        raise _Hostile(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Hostile(path) from None


def _git_dir(top: Path) -> Path | None:
    dot_git = top / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        text = _read(dot_git, MAX_POINTER_BYTES).strip()
        if not text.startswith("gitdir:"):
            raise _Hostile(dot_git)
        found = Path(text[len("gitdir:") :].strip())
        return found if found.is_absolute() else (top / found).resolve()
    return None


def _section(line: str) -> str | None:
    """The remote a ``[remote "name"]`` header opens (None: another section)."""
    inner = line[1:].rstrip()
    if not inner.endswith("]"):
        return None
    head, quote, rest = inner[:-1].partition('"')
    if head.strip() != "remote" or not quote or not rest.rstrip().endswith('"'):
        return None
    return rest.rstrip()[:-1]


def remotes(config_text: str) -> dict[str, str]:
    """Remote name -> URL from a git config file's text, in file order (linear in its length;
    a URL over ``MAX_REMOTE_CHARS`` is left out)."""
    found: dict[str, str] = {}
    current: str | None = None
    for raw in config_text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            current = _section(line)
            continue
        key, equals, value = line.partition("=")
        if current is None or not equals or key.strip().lower() != "url" or current in found:
            continue
        url = value.strip().strip('"')
        if url and len(url) <= MAX_REMOTE_CHARS:
            found[current] = url
    return found


def _common_dir(git_dir: Path) -> Path:
    pointer = git_dir / "commondir"
    if not pointer.is_file():
        return git_dir
    return (git_dir / _read(pointer, MAX_POINTER_BYTES).strip()).resolve()


def git_folder(folder: Path) -> GitFolder | None:
    """The git working tree holding ``folder`` (None: not in one, or its git files are
    unreadable or hostile; see the module)."""
    try:
        folder = folder.resolve()
        for top in (folder, *folder.parents):
            git_dir = _git_dir(top)
            if git_dir is None:
                continue
            config = _common_dir(git_dir) / "config"
            found = remotes(_read(config, MAX_CONFIG_BYTES)) if config.is_file() else {}
            remote = found.get("origin") or next(iter(found.values()), None)
            inner = folder.relative_to(top).as_posix()
            return GitFolder(top, remote, "" if inner == "." else inner)
    except (OSError, ValueError, RuntimeError, _Hostile):
        # OSError: unreadable; ValueError: a NUL in a path; RuntimeError: a symlink loop.
        return None
    return None


def worktrees(folder: Path) -> list[Path]:
    """The same folder in the other working trees of the repository that holds ``folder`` (its
    path inside the tree, in the main tree and in each linked one, at most ``MAX_WORKTREES`` of
    them), those that exist; [] when it is in no repository or its git files are unreadable or
    hostile."""
    found = git_folder(folder)
    if found is None:
        return []
    try:
        git_dir = _git_dir(found.top)
        if git_dir is None:
            return []
        common = _common_dir(git_dir)
        tops = [common.parent] if common.name == ".git" else []
        linked = common / "worktrees"
        names = sorted(p.name for p in linked.iterdir()) if linked.is_dir() else []
        for name in names[:MAX_WORKTREES]:
            pointer = linked / name / "gitdir"
            if pointer.is_file():  # names the linked tree's ``.git`` file
                dot_git = Path(_read(pointer, MAX_POINTER_BYTES).strip())
                if not dot_git.is_absolute():  # git's relative form: from its own folder
                    dot_git = pointer.parent / dot_git
                tops.append(dot_git.parent)
        own = folder.resolve()
        places: dict[Path, Path] = {}
        for top in tops:
            place = top / found.inner_path if found.inner_path else top
            if place.is_dir() and place.resolve() != own:
                places.setdefault(place.resolve(), place)
        return list(places.values())
    except (OSError, ValueError, RuntimeError, _Hostile):
        return []
