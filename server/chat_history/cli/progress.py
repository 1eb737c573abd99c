"""A one-line progress bar on stderr for the CLI's long commands: drawn only when stderr is a
terminal and the work is long, at most ten times a second, and erased when the work ends."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

#: Below this many units (messages, conversations) the work is quick: no bar.
LONG_WORK = 1_000
_WIDTH = 30


class Progress:
    """A progress line on stderr for a long command (only when stderr is a terminal and the work is
    long); used as a context manager that erases it at the end."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        stream: TextIO | None = None,
        long_work: int = LONG_WORK,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self.enabled = total >= long_work and self._stream.isatty()
        self._drawn = 0.0

    def advance(self, units: int = 1) -> None:
        """``units`` more of the total done; the line is redrawn at most ten times a second."""
        self.done += units
        if self.enabled and time.monotonic() - self._drawn >= 0.1:
            self._draw()

    def _draw(self) -> None:
        fraction = min(1.0, self.done / self.total) if self.total else 1.0
        filled = int(fraction * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        self._stream.write(f"\r{self.label} [{bar}] {fraction:4.0%}")
        self._stream.flush()
        self._drawn = time.monotonic()

    def close(self) -> None:
        """Erase the line; later advances draw nothing."""
        if self.enabled and self._drawn:
            self._stream.write("\r" + " " * (len(self.label) + _WIDTH + 9) + "\r")
            self._stream.flush()
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
