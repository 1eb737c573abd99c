"""The layer contract (docs/architecture.md, "Import contract"), checked over the import graph
of ``server/chat_history`` read with ``ast``: every import counts, those inside functions and
under ``TYPE_CHECKING`` too. No circle (in bench/ and tests/ either); each layer imports only
the layers below it; the pure core loads with the standard library and attrs alone; only the
wire speaks camelCase."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "chat_history"

#: Each room and the rooms it may import (besides itself). Lower rooms first.
LAYERS: dict[str, set[str]] = {
    "errors": set(),
    "model": set(),
    "paths": set(),
    "settings": {"errors"},
    "policy": {"errors", "model", "settings"},
    "providers": {"errors", "model", "settings", "policy"},
    "store": {"errors", "model", "policy"},
    "importers": {"errors", "model", "policy"},
    "service": {"errors", "model", "settings", "policy", "providers", "store", "importers"},
    "wire": {"errors", "model", "paths", "settings", "policy", "store", "service", "version"},
    "cli": {
        "errors",
        "model",
        "paths",
        "settings",
        "policy",
        "store",
        "service",
        "wire",
        "version",
        "demo",
        "mcp",
        "acp",
    },
    "acp": {"errors", "model", "settings", "policy", "store", "service", "version"},
    "mcp": {"errors", "model", "settings", "policy", "store", "service", "version"},
    "client": set(),
    "demo": {"client"},
    "entry": {"wire", "version"},
    "version": set(),
}
#: Rooms inside ``policy`` and ``wire`` (issue 40): each folder is a sub-room, the room's own
#: modules its core, and each imports only the sub-rooms it names (besides itself). ``policy``'s
#: core (turns, tokens, the route, calibration, the sweep, ...) knows neither pipeline, and the
#: search pipeline stands alone. The wire's core (the translators: ``protocol``, ``checks``,
#: ``messages``, ``reports``, ``codes``) knows neither the transport nor the methods; the transport
#: knows no method; only the pygls server on top (``WIRE_TOP``) registers the methods.
SUBROOMS: dict[str, set[str]] = {
    "policy": set(),
    "policy.prepare": {"policy"},
    "policy.search": set(),
    "wire": set(),
    "wire.transport": {"wire"},
    "wire.methods": {"wire", "wire.transport"},
    "wire.top": {"wire", "wire.transport", "wire.methods"},
}
#: The pygls server: the session, its lifecycle and the one request helper that registers every
#: method, above everything else of the wire.
WIRE_TOP = {
    "chat_history.wire.server",
    "chat_history.wire.requests",
    "chat_history.wire.session",
    "chat_history.wire.lifecycle",
    "chat_history.wire.lsp",
}
#: Modules that may spell wire names: the wire's translators (the shared results, the CLI's
#: ``--json`` reports, and each family of methods under ``wire/methods/``), the export format's
#: translator, the settings document's reader, the provider bodies (each provider's own wire),
#: the stdio client and the demo (a client of the wire), and ``frames``, below ``protocol``,
#: which builds the JSON-RPC error of an answer too large to send.
CAMEL_ALLOWED = {
    "importers/opencode/database.py",  # OpenCode's export shape, rebuilt from its database's rows
    "wire/protocol.py",
    "wire/reports.py",
    "wire/transport/frames.py",
    "cli/transfer.py",
    "mcp/tools.py",
    "mcp/resources.py",
    "mcp/server.py",
    "acp/rows.py",
    "acp/listing.py",
    "acp/sessions.py",
    "acp/served.py",
    "acp/relay.py",
    "settings.py",
    "client.py",
    "demo.py",
}
CAMEL = re.compile(r"^[a-z]+[A-Z][A-Za-z]*$")


def room_of(module: str) -> str:
    """The room of a dotted module name under ``chat_history``."""
    parts = module.split(".")[1:]
    if not parts:
        return "version"  # chat_history/__init__.py holds only __version__
    head = parts[0]
    if head in {
        "policy",
        "providers",
        "store",
        "service",
        "wire",
        "cli",
        "mcp",
        "acp",
        "importers",
    }:
        return head
    if head in {"__main__", "launch_check"}:
        return "entry"
    return head


def subroom_of(module: str) -> str | None:
    """The sub-room of a module of ``policy`` or ``wire`` (None in the other rooms)."""
    if module in WIRE_TOP:
        return "wire.top"
    parts = module.split(".")[1:]
    if not parts or parts[0] not in {"policy", "wire"}:
        return None
    folder = ".".join(parts[:2])
    return folder if folder in SUBROOMS else parts[0]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every ``chat_history`` module that ``module`` imports, anywhere in its body."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")
                if path.name != "__init__.py":
                    package.pop()
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for name in names:
            while name and name not in known and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in known and name != module:
                yield name


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: set(imports_of(m, p, known)) for m, p in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_even_through_imports_inside_functions() -> None:
    assert circles(graph()) == []


def script_path(relative: Path) -> tuple[str, ...]:
    """The folders a script of bench/ or tests/ finds bare module names in (besides the
    repository's root, for ``tests.pgcluster``): bench/ puts bench/ and tests/unit/ on its path,
    pytest puts tests/unit/ (no ``__init__``) on the path of the tests there."""
    if relative.parts[0] == "bench":
        return ("bench", "tests/unit")
    return ("tests/unit",) if relative.parts[:2] == ("tests", "unit") else ()


def script_graph() -> dict[str, set[str]]:
    """The import graph of bench/ and tests/, by file relative to the repository."""
    root = PACKAGE.parents[1]
    files = sorted(p for top in ("bench", "tests") for p in (root / top).rglob("*.py"))
    dotted = {".".join(p.relative_to(root).with_suffix("").parts): p for p in files}
    edges: dict[str, set[str]] = {}
    for path in files:
        relative = path.relative_to(root)
        known = dict(dotted)
        for folder in script_path(relative):
            known |= {p.stem: p for p in (root / folder).glob("*.py")}
        module = ".".join(relative.with_suffix("").parts)
        edges[relative.as_posix()] = {
            known[name].relative_to(root).as_posix()
            for name in imports_of(module, path, known)
            if known[name] != path
        }
    return edges


def test_no_import_circle_in_bench_or_tests_either() -> None:
    """The room check counts the whole tree: the benchmarks and the tests have no circle."""
    edges = script_graph()
    assert "bench/workload.py" in edges["bench/systems.py"]  # bare names resolve
    assert "tests/pgcluster.py" in edges["tests/conftest.py"]  # dotted ones too
    assert circles(edges) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_each_room_imports_only_the_rooms_below_it() -> None:
    wrong = []
    for module, targets in graph().items():
        room = room_of(module)
        allowed = LAYERS[room] | {room}
        wrong += [f"{module} -> {t}" for t in sorted(targets) if room_of(t) not in allowed]
    assert wrong == []


def subroom_violations(edges: dict[str, set[str]]) -> list[str]:
    """The imports between two sub-rooms of one room that ``SUBROOMS`` does not allow."""
    wrong = []
    for module, targets in edges.items():
        sub = subroom_of(module)
        if sub is None:
            continue
        allowed = SUBROOMS[sub] | {sub}
        for target in sorted(targets):
            other = subroom_of(target)
            if other is not None and room_of(target) == room_of(module) and other not in allowed:
                wrong.append(f"{module} -> {target}")
    return wrong


def test_each_sub_room_imports_only_the_sub_rooms_below_it() -> None:
    assert subroom_violations(graph()) == []


def test_the_sub_room_check_finds_an_import_upwards() -> None:
    edges = {
        "chat_history.policy.turns": {"chat_history.policy.prepare.context"},
        "chat_history.policy.prepare.context": {"chat_history.policy.turns"},
        "chat_history.wire.transport.framing": {"chat_history.wire.methods.history"},
        "chat_history.wire.methods.history": {"chat_history.wire.transport.frames"},
    }
    assert subroom_violations(edges) == [
        "chat_history.policy.turns -> chat_history.policy.prepare.context",
        "chat_history.wire.transport.framing -> chat_history.wire.methods.history",
    ]


def test_every_folder_of_policy_and_wire_is_a_sub_room() -> None:
    """A new folder is given its place in ``SUBROOMS``, not taken for the room's core."""
    folders = {
        f"{room}.{path.name}"
        for room in ("policy", "wire")
        for path in (PACKAGE / room).iterdir()
        if (path / "__init__.py").exists()
    }
    assert folders <= set(SUBROOMS)
    assert WIRE_TOP - set(modules()) == set()


def test_every_module_has_a_room() -> None:
    assert {m for m in modules() if room_of(m) not in LAYERS} == set()


PURE_CORE = sorted(m for m in modules() if room_of(m) in {"policy", "model", "errors", "settings"})


@pytest.mark.parametrize("module", PURE_CORE)
def test_the_pure_core_loads_with_the_standard_library_and_attrs_alone(module: str) -> None:
    """Any third-party import but attrs fails, as it would where only attrs is installed."""
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        top = name.partition('.')[0]\n"
        "        if top in sys.stdlib_module_names or top in ('attrs', 'attr', 'chat_history'):\n"
        "            return None\n"
        "        raise ImportError(f'{name} is not the standard library or attrs')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"import {module}\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2_000:]


def camel_keys(path: Path) -> Iterator[str]:
    """camelCase string keys of dict literals and subscript assignments in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        keys: list[ast.expr | None] = []
        if isinstance(node, ast.Dict):
            keys = list(node.keys)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            keys = [node.slice]
        for key in keys:
            text = key.value if isinstance(key, ast.Constant) else None
            if isinstance(text, str) and CAMEL.match(text):
                yield f"{path.relative_to(PACKAGE)}:{key.lineno}: {text}"


def test_only_the_wire_builds_camel_case_dicts() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in CAMEL_ALLOWED or relative.startswith(("providers/", "wire/methods/")):
            continue
        found += camel_keys(path)
    assert found == []


def test_the_wire_and_the_cli_reach_the_store_only_through_the_manager() -> None:
    """No layer skip: they import no store module but the package's face (types), and neither
    builds a ``Store`` (the manager opens it)."""
    wrong = []
    known = modules()
    for module, targets in graph().items():
        if room_of(module) not in {"wire", "cli"}:
            continue
        wrong += [f"{module} -> {t}" for t in targets if t.startswith("chat_history.store.")]
        for node in ast.walk(ast.parse(known[module].read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Store":
                wrong.append(f"{module}:{node.lineno} builds a Store")
    assert wrong == []


def test_the_store_files_and_every_function_stay_small() -> None:
    """The room check (issue 30): no file of the store over 350 lines, where the engines' seam
    lives and a newcomer reads most, and none of ``policy`` or ``wire`` over 500 (issue 40); no
    function of the package over 70 lines."""
    store = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (PACKAGE / "store").rglob("*.py")
    }
    assert {name: lines for name, lines in store.items() if lines > 350} == {}
    pipelines = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for room in ("policy", "wire")
        for path in (PACKAGE / room).rglob("*.py")
    }
    assert {name: lines for name, lines in pipelines.items() if lines > 500} == {}
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 70:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({lines})")
    assert long == []


def test_the_managers_core_stays_a_core() -> None:
    """Issue 40: the manager is the core every family of operations shares (lock, settings,
    write and read helpers), under 250 lines; an operation lives in its family's module
    (``service/history.py``, ...), not on the manager."""
    core = PACKAGE / "service" / "manager.py"
    assert len(core.read_text(encoding="utf-8").splitlines()) < 250
