"""The physical purge of deleted text on PostgreSQL. A ``DELETE`` is gone from every read and
search at once; the bytes stay in dead tuples and in the trigram index until the table is
rewritten. ``purge_deleted`` (called after every deleting operation) schedules ``purge_now``
within ``purge_seconds``, which runs ``VACUUM FULL`` on the tables of history (a rewrite into new
files, indexes rebuilt; the old files are truncated at its commit) on its own connection, logging
one audit line with counts, never content. It needs the tables' owner (or a superuser); a role
that is not is told once in the log, and the operator runs ``chat-history purge`` as the owner
on a schedule. The write-ahead log and backups keep old pages until the operator's retention
recycles them (docs/server-database.md)."""

from __future__ import annotations

import logging
import threading
import time

from chat_history.store.postgres.link import CONNECT_TIMEOUT_S, LOCK_TIMEOUT_MS, reason

log = logging.getLogger("chat_history")

#: The default purge interval (``purgeSeconds``, ``CHAT_HISTORY_PURGE_SECONDS``).
PURGE_SECONDS = 600.0
#: Tables a purge rewrites: every one that holds text of the history.
PURGED_TABLES = (
    "messages",
    "summaries",
    "conversations",
    "replies",
    "reply_parts",
    "conversation_renames",
    "compactions",
)


class Purge:
    """The purge schedule of one store's database: at most one purge pending."""

    def __init__(self, url: str, purge_seconds: float) -> None:
        self.url = url
        self.purge_seconds = purge_seconds
        self._purge_lock = threading.Lock()
        self._purge_timer: threading.Timer | None = None
        self._purge_refused = False
        #: purges done (audit counts, for tests and logs)
        self.purges = 0

    def purge_deleted(self) -> bool:
        """After an operation deleted or replaced text: the physical purge runs within
        ``purge_seconds`` (at once when 0). Never raises. Returns whether it ran now."""
        if self.purge_seconds <= 0:
            return self.purge_now()
        with self._purge_lock:
            if self._purge_timer is None:
                timer = threading.Timer(self.purge_seconds, self._timed_purge)
                timer.daemon = True
                self._purge_timer = timer
                timer.start()
        return False

    def _timed_purge(self) -> None:
        with self._purge_lock:
            self._purge_timer = None
        if not self.purge_now():
            self.purge_deleted()  # try again at the next interval

    def purge_now(self) -> bool:
        """Rewrite the tables of history (``VACUUM FULL``: dead tuples and index entries of
        deleted text leave the files) on a connection of its own; logs an audit line. Returns
        whether it finished."""
        import psycopg

        started = time.monotonic()
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            ) as raw:
                raw.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
                owned = raw.execute(
                    "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
                    "WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND (r.rolname = current_user "
                    "OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user))",
                    (list(PURGED_TABLES),),
                ).fetchone()
                if not owned or int(owned[0]) < len(PURGED_TABLES):
                    if not self._purge_refused:
                        log.warning(
                            "the purge of deleted text needs the owner of the history tables: "
                            "run `chat-history purge --database ...` as that role on a schedule"
                        )
                        self._purge_refused = True
                    return False
                dead = raw.execute(
                    "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables "
                    "WHERE relname = ANY(%s)",
                    (list(PURGED_TABLES),),
                ).fetchone()
                raw.execute(f"VACUUM FULL {', '.join(PURGED_TABLES)}")
        except Exception as exc:
            log.warning("the purge of deleted text did not finish (%s); retried", reason(exc))
            return False
        self.purges += 1
        log.info(
            "purge: rewrote %s (about %s dead rows) in %.2f s",
            ", ".join(PURGED_TABLES),
            dead[0] if dead else "?",
            time.monotonic() - started,
        )
        return True

    def close(self) -> None:
        """Cancel a pending purge, giving it its last try now."""
        with self._purge_lock:
            timer, self._purge_timer = self._purge_timer, None
        if timer is not None:
            timer.cancel()
            self.purge_now()  # a pending purge gets its last try


class PurgeSteps:
    """The store's members of the purge (``PostgresStore`` has them), over its ``purging``."""

    purging: Purge

    def purge_deleted(self) -> bool:
        """After an operation deleted or replaced text: the purge runs within the interval."""
        return self.purging.purge_deleted()

    def purge_now(self) -> bool:
        """The purge, now (``Purge.purge_now``)."""
        return self.purging.purge_now()

    @property
    def purges(self) -> int:
        """Purges done (audit counts, for tests and logs)."""
        return self.purging.purges
