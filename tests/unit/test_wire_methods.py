"""The wire's one registration table (``wire/methods.METHODS``): every family module's methods
are in it, each name once, each with an attrs params class; and the server registers exactly
these (a family whose line in the table is forgotten fails here, not in an editor)."""

from __future__ import annotations

import importlib
import pkgutil

import attrs

from chat_history.wire import methods
from chat_history.wire.methods.base import Method
from chat_history.wire.requests import Requests
from chat_history.wire.session import ChatHistoryServer


def family_modules() -> list[str]:
    return sorted(
        info.name for info in pkgutil.iter_modules(methods.__path__) if info.name != "base"
    )


def test_every_family_module_is_in_the_table_once() -> None:
    table = list(methods.METHODS)
    for name in family_modules():
        family = importlib.import_module(f"chat_history.wire.methods.{name}")
        own = family.METHODS
        assert own, name
        assert all(isinstance(m, Method) for m in own)
        assert all(table.count(m) == 1 for m in own), name
    names = [m.name for m in table]
    assert len(names) == len(set(names))
    assert sum(
        len(importlib.import_module(f"chat_history.wire.methods.{n}").METHODS)
        for n in family_modules()
    ) == len(table)


def test_the_families_names_are_each_family_s_methods_in_order() -> None:
    assert sorted(methods.FAMILIES) == family_modules()
    for family, names in methods.FAMILIES.items():
        own = importlib.import_module(f"chat_history.wire.methods.{family}").METHODS
        assert tuple(m.name for m in own) == tuple(f"chatHistory/{n}" for n in names), family
        assert methods.family_methods(family) is own


def test_a_request_loads_only_its_own_family() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from chat_history.wire.requests import Requests\n"
        "from chat_history.wire.session import ChatHistoryServer\n"
        "r = Requests(ChatHistoryServer(), on_answer=lambda: None)\n"
        "assert r.method('chatHistory/listConversations').name == 'chatHistory/listConversations'\n"
        "assert r.method('chatHistory/nothing') is None\n"
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules\n"
        "      if m.startswith('chat_history.wire.methods.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['base', 'conversations']"


def test_each_method_has_an_attrs_params_class_and_a_handler() -> None:
    for method in methods.METHODS:
        assert method.name.startswith("chatHistory/")
        assert attrs.has(method.params), method.name
        assert callable(method.run)


def test_the_server_serves_every_method_of_the_table_and_no_other() -> None:
    requests = Requests(ChatHistoryServer(), on_answer=lambda: None)
    for method in methods.METHODS:
        assert requests.method(method.name) is method
    assert requests.method("chatHistory/none") is None
