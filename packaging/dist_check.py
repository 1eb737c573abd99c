"""`make dist-check`: what `make dist` built installs into clean environments and works.

- the server's wheel and its sdist, each into a fresh venv (dependencies from PyPI, nothing of
  this machine's pip configuration): ``chat-history-server --check`` passes there and the
  ``chat-history`` CLI answers;
- the shim's npm tarball into a fresh npm project: its entry points load, and it starts that
  venv's server over stdio (initialize answered, shut down)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

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


def main() -> int:
    (wheel,) = DIST.glob("chat_history_server-*.whl")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
