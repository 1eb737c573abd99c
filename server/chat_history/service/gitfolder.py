"""What a workspace folder is in git, read from the repository's own files (no ``git`` process):
the working tree that holds it, its ``origin`` remote's URL (else the first remote's) and the
folder's path inside the tree. Linked worktrees (``.git`` as a file naming the git folder, with a
``commondir``) share the main repository's config."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

_SECTION = re.compile(r'^\s*\[\s*remote\s+"(?P<name>[^"]*)"\s*\]\s*$')
_ANY_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(?P<url>.+?)\s*$")


@attrs.frozen
class GitFolder:
    #: the working tree's top folder
    top: Path
    #: the remote's URL as configured (None: the repository has no remote)
    remote: str | None
    #: the folder's path inside the working tree, ``/``-separated ("" at its top)
    inner_path: str


def _git_dir(top: Path) -> Path | None:
    dot_git = top / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            found = Path(text[len("gitdir:") :].strip())
            return found if found.is_absolute() else (top / found).resolve()
    return None


def remotes(config_text: str) -> dict[str, str]:
    """Remote name -> URL from a git config file's text, in file order."""
    found: dict[str, str] = {}
    current: str | None = None
    for line in config_text.splitlines():
        section = _SECTION.match(line)
        if section:
            current = section.group("name")
            continue
        if _ANY_SECTION.match(line):
            current = None
            continue
        url = _URL.match(line)
        if current is not None and url and current not in found:
            found[current] = url.group("url").strip('"')
    return found


def git_folder(folder: Path) -> GitFolder | None:
    """The git working tree holding ``folder`` (None: not in one, or unreadable)."""
    try:
        folder = folder.resolve()
        for top in (folder, *folder.parents):
            git_dir = _git_dir(top)
            if git_dir is None:
                continue
            common = git_dir
            if (git_dir / "commondir").is_file():
                common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
            config = common / "config"
            found = (
                remotes(config.read_text(encoding="utf-8", errors="replace"))
                if config.is_file()
                else {}
            )
            remote = found.get("origin") or next(iter(found.values()), None)
            inner = folder.relative_to(top).as_posix()
            return GitFolder(top, remote, "" if inner == "." else inner)
    except OSError:
        return None
    return None
