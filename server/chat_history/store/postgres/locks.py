"""The locks of PostgreSQL writes: every write transaction names the conversations it changes
and locks them first, so the shared read-modify-write code (totals, turn numbers, retention)
never interleaves with another process's on one conversation (a lost update without it:
server-database.md §3.6), while writers of other conversations run beside it.

The locks are row locks on the role's own rows of ``write_locks`` (schema version 4), taken in
one order: the role's row ``WHOLE`` shared, then each conversation's row (``conversation_lock``)
in ascending order. A write without keys (it spans workspaces, or changes rows every
conversation shares: calibration, folder records, fork's block of row ids) locks ``WHOLE``
exclusively: it waits for every writer of its role and every such writer waits for it. Locks
taken in one order never wait in a cycle.

They serialize the writes of one database role only, and no other role can take them:
row-level security hides another role's rows from ``SELECT ... FOR UPDATE``, and members hold no
table-wide privilege that would let them lock the table whole (issue 35 item 7: advisory keys,
before, were one namespace that any role could hold)."""

from __future__ import annotations

import hashlib

from chat_history.model import Key

#: The lock row of a role's whole history: every write locks it, shared when it names its
#: conversations, else exclusively. No conversation's key is this one (``conversation_lock``).
WHOLE = 0


def conversation_lock(key: Key) -> int:
    """The lock row's key of one conversation: the first 64 bits (signed, as ``bigint``) of
    a BLAKE2b hash of its workspace and id, the same in every process and on every machine, and
    never ``WHOLE``. Two conversations sharing one only wait for each other."""
    text = f"{len(key.workspace)}:{key.workspace}:{key.conversation}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True) or 1


def lock_statements(locks: list[int]) -> list[str]:
    """The statements that take a write's locks (``locks``: its conversations' keys, sorted;
    none: the role's whole history, exclusively). The rows are made on first use (a row another
    transaction is making is waited for, then used)."""
    rows = ", ".join(f"({lock})" for lock in [WHOLE, *locks])
    taken = [f"INSERT INTO write_locks (lock) VALUES {rows} ON CONFLICT DO NOTHING"]
    mine = "FROM write_locks WHERE owner = current_user AND lock ="
    taken.append(f"SELECT 1 {mine} {WHOLE} FOR {'SHARE' if locks else 'UPDATE'}")
    taken += [f"SELECT 1 {mine} {lock} FOR UPDATE" for lock in locks]
    return taken
