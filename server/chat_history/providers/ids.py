"""Call ids made valid for a provider and unique across one body: the checks and makers each
kind configures (an id that fits is kept; any other becomes a cleaned head and a hash of the
stored id), the stable hashes they use, and the allocator that keeps one body's ids apart."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

#: Turns a stored call id into the provider's id; the second argument counts earlier clashes.
IdMaker = Callable[[str, int], str]
IdCheck = Callable[[str], bool]


def digest(text: str, salt: int = 0) -> bytes:
    """A stable SHA-256 of ``text`` (``salt`` > 0 gives another, for the n-th clash of made ids)."""
    seed = text if salt == 0 else f"{text}\x00{salt}"
    return hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()


def hex_digest(text: str, salt: int = 0, length: int = 12) -> str:
    """The first ``length`` hex digits of ``digest``: the short hash made ids end with."""
    return digest(text, salt).hex()[:length]


def any_nonempty(call_id: str) -> bool:
    """The id check of a provider that takes any non-empty call id."""
    return bool(call_id)


def hashed_suffix(clean: Callable[[str], str], max_length: int, fallback: str = "call") -> IdMaker:
    """An id maker: the cleaned id cut to fit, then ``_`` and a hash of the stored id."""

    def make(call_id: str, salt: int) -> str:
        suffix = hex_digest(call_id, salt)
        head = clean(call_id)[: max_length - len(suffix) - 1] or fallback
        return f"{head}_{suffix}"

    return make


def id_rules(max_length: int, chars: str | None = None) -> tuple[IdCheck, IdMaker]:
    """``valid_id``/``make_id`` for ids of 1 to ``max_length`` characters, each in the regex class
    ``chars`` when given: such an id is kept; any other becomes its head (other characters
    replaced by ``_``) cut to fit, then ``_`` and a hash."""
    allowed = re.compile(f"[{chars}]*") if chars else None
    other = re.compile(f"[^{chars}]") if chars else None

    def valid(call_id: str) -> bool:
        fits = 0 < len(call_id) <= max_length
        return fits and (allowed is None or allowed.fullmatch(call_id) is not None)

    def clean(call_id: str) -> str:
        return call_id if other is None else other.sub("_", call_id)

    return valid, hashed_suffix(clean, max_length)


class IdAllocator:
    """Call ids made valid for the provider and unique across one body."""

    def __init__(self, valid_id: IdCheck, make_id: IdMaker) -> None:
        self.valid_id = valid_id
        self.make_id = make_id
        self.used: set[str] = set()

    def __call__(self, call_id: str) -> str:
        candidate = call_id if self.valid_id(call_id) else self.make_id(call_id, 0)
        salt = 0
        while candidate in self.used:
            salt += 1
            candidate = self.make_id(call_id, salt)
        self.used.add(candidate)
        return candidate
