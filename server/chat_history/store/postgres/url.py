"""The ``database`` option (``initializationOptions.database``, ``CHAT_HISTORY_DATABASE_URL``, the
CLI's ``--database``): a libpq connection string or ``postgresql://`` URI that never holds a
password — passwords come from libpq's own sources (``PGPASSWORD``, the password file, a service
file, certificates). A bad one is refused naming the field; its text is never repeated (it may
hold a secret the user did not mean to send)."""

from __future__ import annotations

from chat_history.errors import InvalidParams

#: The environment variable that names the database when the client does not.
DATABASE_ENV = "CHAT_HISTORY_DATABASE_URL"
#: The environment variable of the purge interval (``initializationOptions.purgeSeconds``).
PURGE_ENV = "CHAT_HISTORY_PURGE_SECONDS"


def check_database(value: object, field: str = "database") -> str:
    """``value`` when it is a usable connection string without a password, else InvalidParams
    naming ``field`` (the message never quotes the value)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidParams(field, "must be a non-empty libpq connection string or URI")
    from psycopg import conninfo

    try:
        parts = conninfo.conninfo_to_dict(value)
    except Exception:
        raise InvalidParams(
            field, "is not a libpq connection string or postgresql:// URI"
        ) from None
    if parts.get("password"):
        raise InvalidParams(
            field,
            "must not hold a password: use PGPASSWORD, the password file (~/.pgpass), a "
            "service file or a client certificate",
        )
    return value


def check_purge_seconds(value: object, field: str = "purgeSeconds") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 86_400:
        raise InvalidParams(field, "must be a number of seconds from 0 to 86400")
    return float(value)
