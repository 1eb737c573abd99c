"""The locks of PostgreSQL writes: every write transaction names the conversations it changes
and locks them first, so the shared read-modify-write code (totals, turn numbers, retention)
never interleaves with another process's on one conversation (a lost update without it:
server-database.md §3.6), while writers of other conversations run beside it.

The locks are transaction-level advisory locks in one order: ``GLOBAL_LOCK`` shared, then each
conversation's own key (``conversation_lock``) in ascending order. A write without keys (it spans
workspaces, or changes rows every conversation shares: calibration, folder records, fork's block
of row ids) takes ``GLOBAL_LOCK`` exclusively: it waits for every writer and every writer waits
for it. Advisory locks taken in one order never wait in a cycle."""

from __future__ import annotations

import hashlib

from chat_history.model import Key

#: pg_advisory_xact_lock key of the whole database ('chwr'): every write holds it, shared when
#: it names its conversations, else exclusive.
GLOBAL_LOCK = 0x63687772


def conversation_lock(key: Key) -> int:
    """The advisory lock key of one conversation: the first 64 bits (signed, as ``bigint``) of
    a BLAKE2b hash of its workspace and id, the same in every process and on every machine. Two
    conversations sharing one only wait for each other."""
    text = f"{len(key.workspace)}:{key.workspace}:{key.conversation}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_statements(locks: list[int]) -> list[str]:
    """The statements that take a write's locks (``locks``: its conversations' keys, sorted;
    none: the whole database, exclusively)."""
    if locks:
        taken = [f"SELECT pg_advisory_xact_lock_shared({GLOBAL_LOCK})"]
        taken += [f"SELECT pg_advisory_xact_lock({lock})" for lock in locks]
    else:
        taken = [f"SELECT pg_advisory_xact_lock({GLOBAL_LOCK})"]
    return taken
