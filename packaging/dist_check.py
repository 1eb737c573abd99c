"""`make dist-check`: what `make dist` built installs into clean environments and works.

- the server's wheel and its sdist, each into a fresh venv (dependencies from PyPI, nothing of
  this machine's pip configuration): ``chat-history-server --check`` passes there and the
  ``chat-history`` CLI answers;
- the shim's npm tarball into a fresh npm project: its entry points load, and it starts that
  venv's server over stdio (initialize answered, shut down);
- every .vsix target's bundled libraries, assembled from that wheel as `make vsix` does (without
  vsce): each compiled file (apsw's, psycopg_binary's and the libpq it loads) is that target's
  format, machine and C library, every Python 3.11-3.14 has its modules, and the PostgreSQL
  driver is in, or knowingly left out (``postgres_gap`` in targets.py: win32-arm64).

``python packaging/dist_check.py bundles [TARGET...]``: only the last part."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from targets import TARGETS
from vsix import bundle_libs, check_compiled, check_postgres, check_python_versions
from wheels_check import pip_env

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"

NODE_SMOKE = r"""
const assert = require("node:assert/strict");
const shim = require("chat-history-client");
const launch = require("chat-history-client/launch");
const stdio = require("chat-history-client/stdio");
(async () => {
  const found = await launch.findServer({ pythonPath: process.argv[1] });
  assert.equal(found.kind, "setting");
  const server = await stdio.startStdioServer({
    command: found.command, args: found.args, storagePath: process.argv[2],
  });
  assert.ok(server.initializeResult.capabilities);
  await server.shutdown(5000);
  assert.equal(typeof shim.ChatHistoryClient, "function");
  console.log("npm tarball ok:", found.describe);
})().catch((e) => { console.error(e); process.exit(1); });
"""


def run(command: list[str], **kwargs: object) -> str:
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    return str(done.stdout)


def venv_with(artifact: Path, folder: Path) -> Path:
    run([sys.executable, "-m", "venv", str(folder)])
    python = folder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    run([str(python), "-m", "pip", "install", "--quiet", str(artifact)], env=pip_env())
    answer = json.loads(run([str(folder / "bin" / "chat-history-server"), "--check"]))
    assert answer["ok"] is True, answer
    assert "chat-history" in run([str(folder / "bin" / "chat-history"), "--version"])
    print(
        f"{artifact.name}: installs; --check ok "
        f"(Python {answer['python']}, SQLite {answer['sqlite']})"
    )
    return python


def check_bundles(wheel: Path, names: list[str]) -> None:
    """Each target's bundled libraries from ``wheel``, checked as `make vsix` checks them."""
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            target = TARGETS[name]
            work = Path(folder) / name
            stage = work / "extension"
            bundle_libs(target, wheel, work, stage)
            compiled = check_compiled(target, stage)
            pythons = check_python_versions(stage)
            postgres = check_postgres(target, stage)
            print(
                f"{name}: bundled libs for Python {', '.join(pythons)}: {compiled} compiled "
                f"files are {target.binary_format} {target.machine}; PostgreSQL driver: {postgres}",
                flush=True,
            )
            shutil.rmtree(work)


def main() -> int:
    (wheel,) = DIST.glob("chat_history_server-*.whl")
    if sys.argv[1:2] == ["bundles"]:
        check_bundles(wheel, sys.argv[2:] or list(TARGETS))
        return 0
    (sdist,) = DIST.glob("chat_history_server-*.tar.gz")
    (tarball,) = DIST.glob("chat-history-client-*.tgz")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        python = venv_with(wheel, work / "wheel-venv")
        venv_with(sdist, work / "sdist-venv")
        project = work / "npm-project"
        project.mkdir()
        (project / "package.json").write_text('{"name": "smoke", "private": true}\n')
        run(["npm", "install", "--no-audit", "--no-fund", str(tarball)], cwd=project)
        print(
            run(["node", "-e", NODE_SMOKE, str(python), str(work / "store")], cwd=project).strip()
        )
    check_bundles(wheel, list(TARGETS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
