"""The ``database`` option (``initializationOptions.database``, ``CHAT_HISTORY_DATABASE_URL``, the
CLI's ``--database``): a libpq connection string or ``postgresql://`` URI that never holds a
password — passwords come from libpq's own sources (``PGPASSWORD``, the password file, a service
file, certificates). A bad one is refused naming the field; its text is never repeated (it may
hold a secret the user did not mean to send).

A password is refused wherever libpq (or a later expansion of a value) could take one: the
``password`` and ``sslpassword`` parameters, a ``user:password@`` in a URI, and the same inside
any parameter's value that is itself a connection string or URI (``dbname='postgresql://me:PW@H/db'``,
which libpq expands where a database name may be a connection string)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from chat_history.errors import InvalidParams

#: The environment variable that names the database when the client does not.
DATABASE_ENV = "CHAT_HISTORY_DATABASE_URL"
#: The environment variable of the purge interval (``initializationOptions.purgeSeconds``).
PURGE_ENV = "CHAT_HISTORY_PURGE_SECONDS"
#: The longest connection string (characters): far beyond any real one, and checked before it is
#: parsed, so that a hostile one (10 MB) is refused at once instead of read for hours.
MAX_DATABASE_CHARS = 4_096
#: The most hosts one string may list (``host=a,b``, ``postgresql://a,b/db``): libpq's connect
#: timeout applies to each in turn, so their number bounds the time to refuse an unreachable one.
MAX_HOSTS = 4


def check_database(value: object, field: str = "database") -> str:
    """``value`` when it is a usable connection string without a password, else InvalidParams
    naming ``field`` (the message never quotes the value)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidParams(field, "must be a non-empty libpq connection string or URI")
    if len(value) > MAX_DATABASE_CHARS:
        raise InvalidParams(
            field, f"must be at most {MAX_DATABASE_CHARS:,} characters ({len(value):,})"
        )
    from psycopg import conninfo

    try:
        parts = conninfo.conninfo_to_dict(value)
    except Exception:
        raise InvalidParams(
            field, "is not a libpq connection string or postgresql:// URI"
        ) from None
    if _holds_password(parts, depth=0):
        raise InvalidParams(
            field,
            "must not hold a password: use PGPASSWORD, the password file (~/.pgpass), a "
            "service file or a client certificate",
        )
    hosts = max(len(str(parts.get(name) or "").split(",")) for name in ("host", "hostaddr"))
    if hosts > MAX_HOSTS:
        raise InvalidParams(
            field,
            f"names {hosts} hosts (at most {MAX_HOSTS}: each may take the connect timeout)",
        )
    return value


#: Parameters whose value is a secret (libpq's own names).
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
#: How deep values nested in values are read (a value within a value within the string, ...).
_MAX_DEPTH = 4
#: ``scheme://user:secret@`` anywhere in a value, and ``password=`` as a conninfo would say it.
#: Written to match in linear time: a scheme is tried only where a run of scheme characters
#: starts (its first letter found past any leading digits or ``+.-``), and the user part stops
#: at its first ``:`` (else each start rescans the run: quadratic, hours on a long value).
_URI_SECRET = re.compile(
    r"(?<![a-z0-9+.-])[0-9+.-]*[a-z][a-z0-9+.-]*://[^/?#@\s:]*:[^/?#@\s]*@", re.IGNORECASE
)
_KEYWORD_SECRET = re.compile(r"(?:^|[\s&?'\"])(?:ssl)?password\s*=", re.IGNORECASE)


def _holds_password(parts: Mapping[str, object], depth: int) -> bool:
    """Whether the parsed parameters ``parts`` carry a password: as a parameter of their own, or
    inside a value that is a connection string or URI itself (read as libpq reads it)."""
    from psycopg import conninfo

    for name, value in parts.items():
        if name.lower() in _SECRET_PARAMETERS and value:
            return True
        text = str(value)
        if _URI_SECRET.search(text) or _KEYWORD_SECRET.search(text):
            return True
        if depth < _MAX_DEPTH and ("=" in text or "://" in text):
            try:
                nested = conninfo.conninfo_to_dict(text)
            except Exception:
                continue  # not a connection string: libpq would not expand it either
            if _holds_password(nested, depth + 1):
                return True
    return False


def check_purge_seconds(value: object, field: str = "purgeSeconds") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 86_400:
        raise InvalidParams(field, "must be a number of seconds from 0 to 86400")
    return float(value)
