"""lsp_adapter.py is the one module that reaches into pygls internals: the pygls installed is in
the range pyproject.toml supports, and every private attribute the adapter relies on still exists
with the kind it expects (a pygls upgrade that renames one fails here, not in production)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from pygls.lsp.server import LanguageServer

from chat_history.wire.session import ChatHistoryServer
from chat_history.wire.transport import lsp_adapter

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def pygls_requirement() -> Requirement:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    found = [Requirement(d) for d in project["dependencies"] if Requirement(d).name == "pygls"]
    assert len(found) == 1
    return found[0]


def test_pyproject_bounds_pygls_on_both_sides() -> None:
    """The adapter depends on private attributes: an unbounded pygls could change them."""
    specifier = pygls_requirement().specifier
    assert any(spec.operator in (">=", "==", "~=") for spec in specifier)
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in specifier)


def test_installed_pygls_is_within_the_supported_range() -> None:
    installed = Version(importlib.metadata.version("pygls"))
    assert pygls_requirement().specifier.contains(installed)


def _check(owner: object, cls: type, name: str, kind: str | type) -> None:
    if kind == "method":
        assert callable(getattr(cls, name, None)), f"{cls.__name__}.{name} is not a method"
        return
    assert hasattr(owner, name), f"{cls.__name__} has no attribute {name}"
    assert isinstance(kind, type)
    assert isinstance(getattr(owner, name), kind), f"{name} is not a {kind.__name__}"


@pytest.mark.parametrize(("name", "kind"), sorted(lsp_adapter.PROTOCOL_PRIVATES.items(), key=str))
def test_each_protocol_private_attribute_exists_with_its_kind(name: str, kind: str | type) -> None:
    server = ChatHistoryServer()
    protocol = server.protocol
    # The adapter overrides some of them: the override must still override something of pygls's.
    base = lsp_adapter.AdaptedProtocol.__mro__[1]
    _check(protocol, base if kind == "method" else type(protocol), name, kind)


def test_each_server_private_attribute_exists_after_the_adapter_sets_it() -> None:
    server = ChatHistoryServer()
    stop = lsp_adapter.new_stop_event(server)
    for name in lsp_adapter.SERVER_PRIVATES:
        assert getattr(server, name) is stop
    # pygls's own shutdown is what sets it: the attribute is still the one it reads.
    LanguageServer.shutdown(server)  # type: ignore[no-untyped-call]
    assert stop.is_set()


def test_the_adapter_functions_read_the_live_protocol_state() -> None:
    protocol = ChatHistoryServer().protocol
    assert lsp_adapter.shutting_down(protocol) is False
    assert lsp_adapter.request_future(protocol, 1) is None
    protocol._shutdown = True
    assert lsp_adapter.shutting_down(protocol) is True
