"""The launch check (protocol.md "Launch check", launch_check.py) run as extensions run it: a real
interpreter in a subprocess — this one, older ones (pyenv's 3.8-3.10 on this kind of machine),
and a newer one that has the server's pure-Python files but not its compiled SQLite module."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

import chat_history

SERVER = Path(chat_history.__file__).parent.parent
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
MACHINE_PYENV = Path("/root/.pyenv/versions")


def interpreters(*minors: str) -> list[Path]:
    """Interpreters of these versions found on PATH or in pyenv."""
    found: list[Path] = []
    for minor in minors:
        candidates: list[Path] = []
        for root in (PYENV, MACHINE_PYENV):
            candidates += sorted(root.glob(f"{minor}.*/bin/python{minor}"))
        on_path = shutil.which(f"python{minor}")
        if on_path and "shims" not in Path(on_path).parts:  # pyenv's shims may refuse
            candidates.append(Path(on_path))
        for candidate in candidates:
            if candidate.is_file() and candidate.resolve() != Path(sys.executable).resolve():
                found.append(candidate)
                break
    return found


def check(python: Path | str, path: Path = SERVER) -> tuple[int, dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(path)
    done = subprocess.run(
        [str(python), "-m", "chat_history", "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    return done.returncode, json.loads(lines[0]), done.stderr


def test_this_python_passes_with_the_sqlite_the_index_needs() -> None:
    code, answer, _ = check(sys.executable)
    assert code == 0
    assert answer["ok"] is True
    assert answer["problem"] is None and answer["reason"] is None
    assert answer["version"] == chat_history.__version__
    assert answer["python"] == ".".join(map(str, sys.version_info[:3]))
    assert answer["sqlite"] == apsw.sqlite_lib_version()
    assert tuple(int(p) for p in answer["sqlite"].split(".")) >= (3, 42, 0)


def test_the_console_script_checks_too() -> None:
    script = Path(sys.executable).parent / "chat-history-server"
    done = subprocess.run([str(script), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True


def test_older_pythons_are_told_they_are_too_old() -> None:
    old = interpreters("3.8", "3.9", "3.10")
    assert old, "no Python 3.8-3.10 found (pyenv or PATH): the guard cannot be proven"
    for python in old:
        code, answer, stderr = check(python)
        assert code == 1
        assert answer["ok"] is False and answer["reason"] == "pythonTooOld"
        assert "too old" in answer["problem"] and "3.11 or newer" in answer["problem"]
        assert answer["python"].startswith(python.name.removeprefix("python"))
        assert stderr == ""
        # Started as the server, the same Python stops with the same words, no traceback.
        done = subprocess.run(
            [str(python), "-m", "chat_history"],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(SERVER), "PATH": os.environ["PATH"]},
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 1
        assert "too old" in done.stderr and "Traceback" not in done.stderr


def test_a_python_without_the_compiled_module_is_told_so(tmp_path: Path) -> None:
    """Another minor version given these libraries: apsw is absent, or present as this
    Python's build only (a bundle made for another version)."""
    newer = interpreters("3.12", "3.13", "3.14")
    assert newer, "no Python 3.12+ found (pyenv or PATH)"
    code, answer, _ = check(newer[0])
    assert code == 1 and answer["reason"] == "nativeModuleMissing"
    assert "apsw" in answer["problem"] and answer["sqlite"] is None
    libs = tmp_path / "libs"
    shutil.copytree(SERVER / "chat_history", libs / "chat_history")
    shutil.copytree(Path(apsw.__file__).parent, libs / "apsw")
    code, answer, _ = check(newer[0], path=libs)
    assert code == 1 and answer["reason"] == "nativeModuleMissing"
    assert f"Python {answer['python']}" in answer["problem"]


def test_a_missing_dependency_is_named(tmp_path: Path) -> None:
    """The compiled module is there but pygls is not (isolated: no site-packages): the check
    names the import that failed."""
    libs = tmp_path / "libs"
    shutil.copytree(SERVER / "chat_history", libs / "chat_history")
    shutil.copytree(Path(apsw.__file__).parent, libs / "apsw")
    bootstrap = (
        f"import sys, runpy; sys.path.insert(0, {str(libs)!r}); sys.argv[1:] = ['--check']; "
        "runpy.run_module('chat_history', run_name='__main__', alter_sys=True)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", bootstrap], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] is False and answer["reason"] == "dependencyMissing"
    assert "No module named" in answer["problem"]
    assert answer["sqlite"] == apsw.sqlite_lib_version()


def test_the_first_modules_parse_as_python_3_8() -> None:
    for name in ("__init__.py", "__main__.py", "launch_check.py"):
        source = (SERVER / "chat_history" / name).read_text()
        ast.parse(source, feature_version=(3, 8))


BROKEN_IMPORTS = {
    "SyntaxError": "def broken(:\n",
    "RuntimeError": "raise RuntimeError('this build does not run here')\n",
    "AttributeError": "import sys\nsys.no_such_attribute\n",
}
CASES = [(m, e, source) for m in ("pygls", "apsw") for e, source in sorted(BROKEN_IMPORTS.items())]
# an apsw that loads but breaks the check itself (it has Connection, nothing else)
CASES.append(("apsw", "AttributeError", "Connection = object\n"))


@pytest.mark.parametrize(("module", "error", "source"), CASES)
def test_a_dependency_that_fails_as_it_loads_is_one_json_line(
    tmp_path: Path, module: str, error: str, source: str
) -> None:
    """A PYTHONPATH entry ahead of the server's shadows a dependency with a module that raises
    ``error`` on import: the check still prints its one line, ``ok: false``, no traceback."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / f"{module}.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), str(SERVER)])
    done = subprocess.run(
        [sys.executable, "-m", "chat_history", "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    answer = json.loads(lines[0])
    assert answer["ok"] is False and answer["reason"] == "dependencyMissing"
    assert error in answer["problem"]
