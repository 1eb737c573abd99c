"""The settings barrier (protocol.md, "Settings are in force before any request runs"): which
settings each request runs under, and how long it waits for the editor's answer to a
``workspace/configuration`` pull. No pygls here; the server feeds it events, the request thread
asks it for the settings in force."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import attrs

from chat_history.settings import Settings

#: How long requests wait for a pull's answer before they run without it (protocol.md).
BOUND_SECONDS = 10.0


def retention_held(settings: Settings) -> Settings:
    """``settings`` with every rule that deletes or cuts stored history switched off: what runs
    while the editor's settings are unknown (nothing is lost under values the user may not hold)."""
    return attrs.evolve(settings, enable_auto_pruning=False, max_tool_result_chars=0)


class SettingsBarrier:
    """Pulls are numbered; a request takes a ticket (the newest pull when it arrives) and waits
    until that pull, or a later one, is answered, at most ``bound`` seconds after the pull began.
    A request that stops waiting at the bound runs under the known settings with retention held,
    and so does every later one until a pull is answered; ``on_expired`` is told once per such
    wait. Thread-safe: events come from the event loop, waits from the request thread."""

    def __init__(
        self,
        settings: Settings,
        *,
        bound: float = BOUND_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_expired: Callable[[], None] = lambda: None,
    ) -> None:
        self._settings = settings
        self._bound = bound
        self._clock = clock
        self._on_expired = on_expired
        self._raised = 0  # the newest pull (0: none yet)
        self._answered = 0  # every pull up to this one is answered
        self._deadline: dict[int, float] = {}
        self._expired = False  # a request gave up waiting; holds until the next answer
        self._changed = threading.Condition()

    # -- events (event loop) -----------------------------------------------------------------

    def raise_(self) -> int:
        """A pull is about to be sent (or the first one is expected): the pull's number."""
        with self._changed:
            self._raised += 1
            self._deadline[self._raised] = self._clock() + self._bound
            return self._raised

    def answer(self, pull: int, settings: Settings | None) -> None:
        """The answer to pull ``pull``: its settings, or None to keep the current ones (a
        ``null`` answer, or an error). An answer older than one already applied changes
        nothing but is still an answer."""
        with self._changed:
            if pull > self._answered:
                if settings is not None:
                    self._settings = settings
                self._answered = pull
                for done in [p for p in self._deadline if p <= pull]:
                    del self._deadline[done]
                if self._answered >= self._raised:
                    self._expired = False
            self._changed.notify_all()

    def push(self, settings: Settings) -> None:
        """Settings the editor sent itself (initializationOptions, didChangeConfiguration)."""
        with self._changed:
            self._settings = settings
            self._changed.notify_all()

    def abandon(self) -> None:
        """No answer can come any more (the client is gone): pending pulls are past their bound
        now, so waiting requests run, with retention held."""
        with self._changed:
            now = self._clock()
            for pull in self._deadline:
                self._deadline[pull] = min(self._deadline[pull], now)
            self._changed.notify_all()

    def wake(self) -> None:
        """Re-check waiting requests (one of them was cancelled)."""
        with self._changed:
            self._changed.notify_all()

    # -- requests ----------------------------------------------------------------------------

    def ticket(self) -> int:
        """Taken when a request arrives, in arrival order: the pull it waits for."""
        with self._changed:
            return self._raised

    def ready(self, ticket: int) -> bool:
        """Whether ``settings_for(ticket)`` would not wait: no pull it waits for is pending."""
        with self._changed:
            return ticket <= self._answered or ticket not in self._deadline

    @property
    def bound(self) -> float:
        """How long a request waits for the settings before it runs with those known so far, in
        seconds."""
        return self._bound

    @property
    def held(self) -> bool:
        """Retention is held: a pull went unanswered past its bound and none answered since."""
        with self._changed:
            return self._expired and self._answered < self._raised

    def expire_due(self) -> bool:
        """Hold retention if a pending pull is past its bound; True the first time it does
        (the caller warns once)."""
        with self._changed:
            return self._expire_due_locked()

    def _expire_due_locked(self) -> bool:
        if self._expired or self._answered >= self._raised:
            return False
        now = self._clock()
        if not any(now >= deadline for deadline in self._deadline.values()):
            return False
        self._expired = True
        return True

    def settings_for(self, ticket: int, stop: Callable[[], bool] = lambda: False) -> Settings:
        """Block until pull ``ticket`` is answered or past its bound (or ``stop()`` holds), then
        the settings in force: the known ones, with retention held while a pull went unanswered
        past its bound."""
        newly_expired = False
        with self._changed:
            while ticket > self._answered and not stop():
                deadline = self._deadline.get(ticket)
                if deadline is None:
                    break
                left = deadline - self._clock()
                if left <= 0:
                    newly_expired = self._expire_due_locked()
                    break
                self._changed.wait(left)
            newly_expired = newly_expired or self._expire_due_locked()
            held = self._expired and self._answered < self._raised
            settings = retention_held(self._settings) if held else self._settings
        if newly_expired:
            self._on_expired()
        return settings
