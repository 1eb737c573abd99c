"""The launch check (protocol.md "Launch check"): ``chat-history-server --check`` /
``python -m chat_history --check`` prints one line of JSON ``{"ok", "version", "python",
"sqlite", "problem", "reason"}`` and exits 0 when the server can run with this Python, else 1
with a problem a person can act on. Extensions run it before starting the server.

This module runs first, on whatever Python an extension found: it must load on any Python >= 3.8,
so it uses nothing newer (no ``match``, no ``X | Y`` outside annotations) and imports the server
only once the version is known to be new enough. ``reason`` names the kind of problem for a
program: ``pythonTooOld``, ``nativeModuleMissing``, ``sqliteTooOld``, ``dependencyMissing`` (a
dependency is absent or fails to load: any exception its import raises, SyntaxError,
RuntimeError and AttributeError included). Whatever fails, the answer is still that one line."""

from __future__ import annotations

import json
import sys

from chat_history import __version__

MINIMUM_PYTHON = (3, 11)
#: FTS5's secure-delete option, which the search index needs.
MINIMUM_SQLITE = (3, 42, 0)


def _python() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])


def too_old() -> str | None:
    """The problem with this Python's version, or None when it is new enough."""
    if tuple(sys.version_info[:2]) >= MINIMUM_PYTHON:
        return None
    return (
        f"Python {_python()} ({sys.executable}) is too old: the chat history server needs "
        f"Python {MINIMUM_PYTHON[0]}.{MINIMUM_PYTHON[1]} or newer"
    )


def _sqlite() -> tuple[str | None, str | None, str | None]:
    """(SQLite version, problem, reason) of the engine the store uses."""
    try:
        import apsw
    except ImportError as exc:
        return None, _native_missing(exc), "nativeModuleMissing"
    except Exception as exc:  # a module of that name that fails as it loads
        return None, _cannot_load(exc), "dependencyMissing"
    if not hasattr(apsw, "Connection"):  # a package folder whose compiled module is not ours
        return None, _native_missing(None), "nativeModuleMissing"
    version = apsw.sqlite_lib_version()
    numbers = tuple(int(part) for part in version.split("."))
    try:
        connection = apsw.Connection(":memory:")
        connection.execute(
            "CREATE VIRTUAL TABLE probe USING fts5(body); "
            "INSERT INTO probe(probe, rank) VALUES ('secure-delete', 1)"
        )
        connection.close()
    except apsw.Error as exc:
        numbers = (0,)
        detail = str(exc)
    if numbers < MINIMUM_SQLITE:
        return (
            version,
            f"SQLite {version} (from apsw) cannot run the search index: it needs SQLite "
            f"3.42 or newer with FTS5" + (f" ({detail})" if numbers == (0,) else ""),
            "sqliteTooOld",
        )
    return version, None, None


def _native_missing(exc: BaseException | None) -> str:
    found = f" ({exc})" if exc is not None else ""
    return (
        f"the compiled SQLite module (apsw) is not installed for Python {_python()} "
        f"({sys.executable}){found}: use a Python the server was installed or packaged for"
    )


def report() -> dict[str, object]:
    """What the check prints."""
    answer: dict[str, object] = {
        "ok": False,
        "version": __version__,
        "python": _python(),
        "sqlite": None,
        "problem": None,
        "reason": None,
    }
    problem = too_old()
    if problem is not None:
        answer.update(problem=problem, reason="pythonTooOld")
        return answer
    sqlite, problem, reason = _sqlite()
    answer["sqlite"] = sqlite
    if problem is None:
        try:
            # Every dependency the server loads: its front, then pygls in the background.
            import chat_history.wire.lsp
            import chat_history.wire.methods
            import chat_history.wire.server  # noqa: F401
        except Exception as exc:  # not only ImportError: a dependency may fail as it loads
            problem, reason = _cannot_load(exc), "dependencyMissing"
    answer.update(ok=problem is None, problem=problem, reason=reason)
    return answer


def _cannot_load(exc: BaseException) -> str:
    return (
        f"Python {_python()} ({sys.executable}) cannot load the chat history server: "
        f"{type(exc).__name__}: {exc}"
    )


def run() -> int:
    """Print the check's line; the exit status."""
    try:
        answer = report()
    except Exception as exc:  # a dependency that loaded but broke the check: still one line
        answer = {
            "ok": False,
            "version": __version__,
            "python": _python(),
            "sqlite": None,
            "problem": _cannot_load(exc),
            "reason": "dependencyMissing",
        }
    print(json.dumps(answer), flush=True)
    return 0 if answer["ok"] else 1
