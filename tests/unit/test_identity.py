"""The pure rules of workspace identity (policy/identity.py) and the git folder reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat_history.errors import InvalidParams
from chat_history.model import Message
from chat_history.policy.identity import (
    MAX_IDENTITY_BYTES,
    Fingerprint,
    checked_identity,
    checked_session_workspace,
    folder_of,
    folder_uri,
    moved_from,
    normalize_remote,
    normalize_uri,
    renamed_id,
    repository_identity,
)
from chat_history.service import history, workspaces
from chat_history.service.gitfolder import (
    MAX_POINTER_BYTES,
    MAX_REMOTE_CHARS,
    git_folder,
    remotes,
)
from chat_history.service.manager import ChatHistoryManager
from chat_history.store import Key, Store


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
    with_history = {"live", "gone", "gone-old", "other-machine", "other-remote"}
    exists = {"/live", "/new"}
    found = moved_from(current, records, with_history.__contains__, exists.__contains__)
    assert found is not None and found.workspace == "gone"
    assert (
        moved_from(
            fp("new", "/new", remote=None), records, with_history.__contains__, exists.__contains__
        )
        is None
    )
    assert moved_from(current, records[:1], with_history.__contains__, exists.__contains__) is None


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


@pytest.mark.parametrize(
    "spelling",
    [
        "file:///home/me/other/../my%20proj/caf%C3%A9",
        "file:///home/me/./my%20proj//caf%c3%a9/",
        "file:///home/me/my proj/café",
        "file:///home//me/my%20proj/caf%C3%A9/.",
        "file:///home/me/my%20proj/x/y/../../caf%C3%A9",
        "file:///home/%6De/my%20proj/%2E/caf%C3%A9",
    ],
)
def test_every_spelling_of_one_local_folder_is_one_canonical_form(spelling: str):
    canonical = "file:///home/me/my%20proj/caf%C3%A9"
    assert normalize_uri(spelling) == canonical
    assert normalize_uri(canonical) == canonical
    assert folder_of(canonical) == "/home/me/my proj/café"
    assert folder_uri("/home/me/my proj/café") == canonical


def test_canonical_form_keeps_what_names_another_folder():
    assert normalize_uri("file:///c:/..") == "file:///c:"  # never above the drive
    assert normalize_uri("file:///../a") == "file:///a"
    assert normalize_uri("file:///a%2Fb") == "file:///a%2Fb"  # a slash inside one name
    assert normalize_uri("file:///100%") == "file:///100%25"  # not an escape: a character
    assert folder_uri("/data/100%25") == "file:///data/100%2525"
    assert folder_uri("c:/Users/Me") == "file:///c:/Users/Me"
    assert normalize_uri("file:///home/Me") != normalize_uri("file:///home/me")
    undecodable = "/data/\udcff"  # a name that is not UTF-8, as os.fsdecode gives it
    assert folder_uri(undecodable) == "file:///data/%FF"
    assert folder_of("file:///data/%FF") == undecodable


def test_a_taken_conversation_id_moves_under_the_first_free_new_one():
    assert renamed_id("main", {"main"}) == "main (moved)"
    assert renamed_id("main", {"main", "main (moved)"}) == "main (moved 2)"
    long = "x" * 256
    assert len(renamed_id(long, {long})) == 256
    assert renamed_id(long, {long}).endswith(" (moved)")


def test_identities_over_the_bound_are_refused_naming_the_field():
    longest = "file:///" + "a" * (MAX_IDENTITY_BYTES - len("file:///"))
    assert checked_identity(longest, "workspace") == longest
    assert checked_session_workspace(longest + "/", "workspace_folders[0].uri") == longest + "/"
    with pytest.raises(InvalidParams) as caught:
        checked_session_workspace(longest + "b", "workspace_folders[0].uri")
    assert caught.value.field == "workspace_folders[0].uri"
    assert "aaaa" not in str(caught.value)  # the value is never echoed
    # Encoding counts: 300 "é" are 1,800 characters once normalized; bytes count in UTF-8.
    with pytest.raises(InvalidParams) as caught:
        checked_identity("file:///" + "é" * 300, "workspace")
    assert caught.value.field == "workspace"
    assert checked_identity("é" * (MAX_IDENTITY_BYTES // 2), "workspace")  # not a URI: as is
    with pytest.raises(InvalidParams):
        checked_identity("é" * (MAX_IDENTITY_BYTES // 2) + "e", "workspace")


def hostile(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


def test_a_hostile_git_folder_has_no_fingerprint(tmp_path: Path):
    nul = hostile(tmp_path, "nul")
    (nul / ".git").write_bytes(b"gitdir: x\0y\n")
    loop = hostile(tmp_path, "loop")
    (loop / "cycle").symlink_to(loop / "cycle")
    (loop / ".git").write_text("gitdir: cycle\n")
    common = hostile(tmp_path, "common")
    (common / ".git").mkdir()
    (common / ".git" / "commondir").write_bytes(b"\xff\xfe../..\n")
    huge = hostile(tmp_path, "huge")
    (huge / ".git").write_bytes(b"gitdir: " + b"a" * (2 * MAX_POINTER_BYTES))
    not_a_pointer = hostile(tmp_path, "pointer")
    (not_a_pointer / ".git").write_text("hello\n")
    for folder in (nul, loop, common, huge, not_a_pointer):
        assert git_folder(folder) is None, folder.name


def test_a_remote_url_is_read_in_linear_time_and_bounded():
    spaces = " " * 200_000
    text = f'[remote "origin"]\n\turl = https://x.org/a{spaces}b\n[remote "up"]\n\turl = u2\n'
    assert remotes(text) == {"up": "u2"}  # the long one is no remote
    assert remotes(f'[remote "origin"]\n\turl = "git@x.org:o/r.git"{spaces}\n') == {
        "origin": "git@x.org:o/r.git"
    }
    longest = "h/" + "p" * (MAX_REMOTE_CHARS - 2)
    assert remotes(f'[remote "o"]\nurl={longest}\n') == {"o": longest}
    assert remotes(f'[remote "o"]\nurl={longest}p\n') == {}
    assert remotes('[ remote "o" ]\n URL = u\n[remote]\nurl = v\n') == {"o": "u"}


def test_a_session_opens_without_a_write_unless_there_is_something_to_re_key(tmp_path: Path):
    manager = ChatHistoryManager(Store(tmp_path / "store"))
    try:
        history.append(manager, Key("file:///c:/proj", "c1"), [Message(role="user", content="x")])
        plain = workspaces.resolve("file:///C:/proj/", "folder")
        with manager.store.snapshot() as reading:
            assert not workspaces.needs_opening(reading, plain)
        assert workspaces.open_identity(manager, plain, "") == []
        history.append(manager, Key("file:///C:/other/", "c1"), [Message(role="user", content="y")])
        with manager.store.snapshot() as reading:
            assert workspaces.needs_opening(reading, plain)
        assert workspaces.open_identity(manager, plain, "") == [
            "history of file:///C:/other/ moved to file:///c:/other (another spelling of its URI)"
        ]
    finally:
        manager.close()


def test_a_named_workspace_names_a_symlinked_folder_by_its_target(tmp_path: Path):
    proj = tmp_path / "real" / "proj"
    (proj / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(proj, target_is_directory=True)
    (tmp_path / "via").symlink_to(tmp_path / "real", target_is_directory=True)
    real = proj.resolve().as_uri()
    for named in (
        (tmp_path / "link").as_uri(),
        (tmp_path / "link").as_uri() + "/",
        str(tmp_path / "link"),
        (tmp_path / "via" / "proj").as_uri(),
        str(tmp_path / "via" / "proj"),
        proj.as_uri(),
    ):
        assert workspaces.named_workspace(named) == real, named
    assert workspaces.named_workspace((tmp_path / "link" / "sub").as_uri()) == real + "/sub"
    # what names no local folder here is only normalized
    for other in ("default", "repo:github.com/o/r/", "file:///no/such/folder", "/no/such"):
        assert workspaces.named_workspace(other) == normalize_uri(other)
    gone = tmp_path / "dangling"
    gone.symlink_to(tmp_path / "nowhere")
    assert workspaces.named_workspace(gone.as_uri()) == gone.as_uri()
