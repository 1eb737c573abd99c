"""Conversation titles (protocol.md "Version 2" → Conversations): the automatic title from the
first real user message, the bounds of a client's title, and a fork's title."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chat_history.errors import InvalidParams
from chat_history.model import Message
from chat_history.policy.titles import (
    AUTO_TITLE_LENGTH,
    TITLE_LENGTH,
    auto_title,
    check_title,
    fork_title,
    title_text,
)


def U(text: str) -> Message:
    return Message(role="user", content=text)


def test_the_first_real_user_message_that_is_not_blank_gives_the_title() -> None:
    rows = [
        Message(role="system", content="You are helpful."),
        Message(role="assistant", content="Hi there"),
        U("   \n\t "),
        U("[Tool results] read_file: ok"),
        U("  Fix   the\nlogin\t bug  "),
        U("second question"),
    ]
    assert auto_title(rows) == "Fix the login bug"


def test_no_real_user_text_means_no_title() -> None:
    assert auto_title([Message(role="assistant", content="hello"), U("[SOP: step"), U(" ")]) is None
    assert auto_title([]) is None


def test_a_title_of_exactly_80_code_points_is_kept_whole() -> None:
    text = "é" * AUTO_TITLE_LENGTH
    assert title_text(text) == text


def test_a_longer_title_is_cut_to_79_and_an_ellipsis() -> None:
    title = title_text("日本" * 50)
    assert title == ("日本" * 50)[:79] + "…"
    assert len(title) == AUTO_TITLE_LENGTH


def test_collapsing_happens_before_the_cut() -> None:
    assert title_text("a" + " " * 200 + "b") == "a b"


@given(st.text())
def test_an_automatic_title_is_collapsed_trimmed_and_short(text: str) -> None:
    title = title_text(text)
    if title is None:
        assert not text.split()
        return
    assert 0 < len(title) <= AUTO_TITLE_LENGTH
    assert title == title.strip()
    assert "  " not in title
    body = title.removesuffix("…") if len(" ".join(text.split())) > AUTO_TITLE_LENGTH else title
    assert " ".join(text.split()).startswith(body)


def test_a_fork_title_adds_the_suffix() -> None:
    assert fork_title("Login bug") == "Login bug (fork)"


def test_a_long_fork_title_cuts_the_title_so_the_whole_fits() -> None:
    title = "x" * TITLE_LENGTH
    forked = fork_title(title)
    assert len(forked) == TITLE_LENGTH
    assert forked == "x" * (TITLE_LENGTH - 7) + " (fork)"


@given(st.text(min_size=1, max_size=TITLE_LENGTH))
def test_a_fork_title_always_fits(title: str) -> None:
    forked = fork_title(title)
    assert len(forked) <= TITLE_LENGTH
    assert forked.endswith(" (fork)")
    assert title.startswith(forked.removesuffix(" (fork)"))


@pytest.mark.parametrize("title", ["", "   ", "\n", "x" * (TITLE_LENGTH + 1)])
def test_an_empty_blank_or_overlong_title_is_refused_naming_the_field(title: str) -> None:
    with pytest.raises(InvalidParams) as error:
        check_title(title)
    assert error.value.field == "title"


@pytest.mark.parametrize("title", ["a", "x" * TITLE_LENGTH, "東" * TITLE_LENGTH, " padded "])
def test_a_title_of_1_to_200_code_points_is_kept_as_given(title: str) -> None:
    assert check_title(title) == title
