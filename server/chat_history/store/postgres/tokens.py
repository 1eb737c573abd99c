"""The token every PostgreSQL write carries (issue 35 item 6). A commit whose connection drops
has an outcome the server does not know: the database may have committed it (the answer was
lost) or not. Each write therefore writes a fresh random token into its backend's row of
``write_tokens`` (one row per backend and role, behind row-level security: the table stays
small), committed with it or not at all. On a connection lost during COMMIT the store connects
again and asks: ``settle`` waits until the old backend's transaction has ended (its row stays
locked until then), reads the row, and says whether it holds this write's token."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chat_history.errors import StorageError
from chat_history.store.postgres.link import reason

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("chat_history")

#: How long a write whose connection was lost as it committed tries to reach the database again
#: to learn whether it committed (then 1002 saying the outcome is unknown).
SETTLE_SECONDS = 30.0


def statement(token: bytes) -> str:
    """The statement of a write that records ``token`` as its backend's newest."""
    return (
        f"INSERT INTO write_tokens (token) VALUES (decode('{token.hex()}', 'hex')) "
        "ON CONFLICT (owner, backend) DO UPDATE SET token = excluded.token"
    )


def settle(
    reconnect: Callable[[], psycopg.Connection[Any]],
    drop: Callable[[], None],
    token: bytes,
    backend: int,
    lost: Exception,
) -> bool:
    """Whether the write that wrote ``token`` on backend ``backend`` committed, asked on a new
    connection (``reconnect``; ``drop`` forgets a failed one). Tries for up to SETTLE_SECONDS;
    StorageError when the database cannot be reached in that time."""
    log.warning("the database connection was lost at commit (%s); checking", reason(lost))
    drop()
    give_up = time.monotonic() + SETTLE_SECONDS
    while True:
        try:
            return _holds(reconnect(), token, backend)
        except Exception as failed:
            drop()
            if time.monotonic() >= give_up:
                raise StorageError(
                    "the connection to the database was lost as a write committed, and the "
                    "database could not be reached again to learn whether it was stored "
                    f"({reason(failed)})"
                ) from failed
            time.sleep(0.25)


def _holds(raw: psycopg.Connection[Any], token: bytes, backend: int) -> bool:
    raw.execute("BEGIN")
    raw.execute(f"SET LOCAL lock_timeout = {int(SETTLE_SECONDS * 1000)}")
    row = raw.execute(
        "SELECT token FROM write_tokens WHERE owner = current_user AND backend = %s FOR SHARE",
        (backend,),
    ).fetchone()
    raw.execute("ROLLBACK")  # it only waited: nothing to commit (or to replicate)
    return row is not None and bytes(row[0]) == token
