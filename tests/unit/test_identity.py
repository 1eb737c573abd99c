"""The pure rules of workspace identity (policy/identity.py) and the git folder reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat_history.policy.identity import (
    Fingerprint,
    folder_of,
    moved_from,
    normalize_remote,
    normalize_uri,
    repository_identity,
)
from chat_history.service.gitfolder import git_folder, remotes


@pytest.mark.parametrize(
    "spelling",
    [
        "file:///c%3A/Users/me/proj",  # VS Code
        "file:///C:/Users/me/proj/",  # Neovim
        "file:///c:/Users/me/proj",
        "FILE:///C%3a/Users/me/proj//",
        "file://localhost/C:/Users/me/proj",
    ],
)
def test_every_editors_spelling_of_one_windows_folder_is_one_identity(spelling: str):
    assert normalize_uri(spelling) == "file:///c:/Users/me/proj"


def test_normalization_keeps_what_needs_encoding_and_other_identities():
    assert normalize_uri("file:///home/me/my%20proj/") == "file:///home/me/my%20proj"
    assert normalize_uri("file:///home/me/a%2fb") == "file:///home/me/a%2Fb"
    assert normalize_uri("file:///home/me/caf%C3%A9") == "file:///home/me/caf%C3%A9"
    assert normalize_uri("file:///") == "file:///"
    assert normalize_uri("vscode-remote://ssh-remote+box/home/me/") == (
        "vscode-remote://ssh-remote+box/home/me/"
    )
    assert normalize_uri("default") == "default"
    assert folder_of("file:///c:/Users/me/proj") == "c:/Users/me/proj"
    assert folder_of("file:///home/me/my%20proj") == "/home/me/my proj"
    assert folder_of("file://server/share") is None
    assert folder_of("repo:github.com/o/r/") is None


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:example/proj.git",
        "https://github.com/example/proj",
        "https://user@GitHub.com/example/proj.git/",
        "ssh://git@github.com/example/proj.git",
        "ssh://git@github.com:22/example/proj",
    ],
)
def test_remote_spellings_of_one_repository_normalize_alike(url: str):
    assert normalize_remote(url) == "github.com/example/proj"
    assert repository_identity(url, "sub/dir/") == "repo:github.com/example/proj/sub/dir"
    assert repository_identity(url, "") == "repo:github.com/example/proj/"


def fp(workspace: str, folder: str, machine: str = "m1", remote: str | None = "r", at: int = 1):
    return Fingerprint(workspace, machine, folder, remote, "", at)


def test_a_moved_folder_takes_only_a_gone_folders_history_on_this_machine():
    current = fp("new", "/new")
    records = [
        fp("live", "/live", at=5),
        fp("gone-old", "/gone-old", at=2),
        fp("gone", "/gone", at=3),
        fp("other-machine", "/x", machine="m2", at=9),
        fp("other-remote", "/y", remote="r2", at=9),
        fp("empty", "/empty", at=9),
    ]
    history = {"live", "gone", "gone-old", "other-machine", "other-remote"}
    exists = {"/live", "/new"}
    found = moved_from(current, records, history.__contains__, exists.__contains__)
    assert found is not None and found.workspace == "gone"
    assert (
        moved_from(
            fp("new", "/new", remote=None), records, history.__contains__, exists.__contains__
        )
        is None
    )
    assert moved_from(current, records[:1], history.__contains__, exists.__contains__) is None


def test_git_folder_reads_origin_else_the_first_remote_and_the_inner_path(tmp_path: Path):
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    (top / "a" / "b").mkdir(parents=True)
    (top / ".git" / "config").write_text(
        '[remote "upstream"]\n\turl = https://x.org/up.git\n[remote "origin"]\n'
        "\turl = git@x.org:me/fork.git\n"
    )
    found = git_folder(top / "a" / "b")
    assert found is not None
    assert (found.top, found.remote, found.inner_path) == (top, "git@x.org:me/fork.git", "a/b")
    assert remotes('[remote "up"]\n url = u1\n[core]\n url = no\n') == {"up": "u1"}
    worktree = tmp_path / "wt"
    worktree.mkdir()
    gitdir = top / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    (worktree / ".git").write_text(f"gitdir: {gitdir}\n")
    linked = git_folder(worktree)
    assert (
        linked is not None and linked.remote == "git@x.org:me/fork.git" and linked.inner_path == ""
    )
    assert git_folder(tmp_path / "nowhere") is None or git_folder(tmp_path) is None
