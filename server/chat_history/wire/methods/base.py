"""What a family of methods declares to the server: each method's name, its params type and
the handler that runs it (``wire.server.request`` registers them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs


@attrs.frozen
class Method:
    """One custom method: ``name`` on the wire, ``params`` (an attrs class the one converter
    structures) and ``run(manager, server, params)``, whose return value is the answer."""

    name: str
    params: type
    run: Callable[[Any, Any, Any], Any]
