/**
 * findServer: the order (explicit interpreter, frozen server, bundled libraries with a found
 * Python >= 3.11) and the one message per failure, with real interpreters (this repo's venv,
 * pyenv's 3.10 and 3.12 on this kind of machine) and small scripts standing in for a frozen
 * server, a system Python that refuses pip, and the Windows Store stub.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { findServer, ServerNotFoundError, type PythonCandidate } from "../src/launch";
import { startStdioServer } from "../src/stdio";
import { PYTHON, REPO_ROOT, tempDir } from "./helpers";

const NOWHERE: PythonCandidate[] = [
  { command: "/nonexistent/python3.14", args: [] },
  { command: "/nonexistent/python3", args: [] },
];

/** A Python of this minor version from pyenv (this kind of machine has 3.10 and 3.12). */
function pyenv(minor: string): string {
  for (const root of [process.env.PYENV_ROOT, "/root/.pyenv"].filter(Boolean) as string[]) {
    const versions = join(root, "versions");
    if (!existsSync(versions)) continue;
    for (const version of readdirSync(versions).sort()) {
      const python = join(versions, version, "bin", `python${minor}`);
      if (version.startsWith(`${minor}.`) && existsSync(python)) return python;
    }
  }
  throw new Error(`no Python ${minor} in pyenv: this test needs one`);
}

/** An extension folder with bundled/boot.py and bundled/libs holding this venv's packages and the server. */
function extensionWithLibs(t: TestContext): string {
  const ext = tempDir(t, "chat-history-ext-");
  const libs = join(ext, "bundled", "libs");
  mkdirSync(libs, { recursive: true });
  copyFileSync(join(REPO_ROOT, "packaging", "boot.py"), join(ext, "bundled", "boot.py"));
  const purelib = execFileSync(PYTHON, ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], {
    encoding: "utf8",
  }).trim();
  for (const name of readdirSync(purelib)) {
    if (name.endsWith(".pth") || name.startsWith("chat_history") || name.startsWith("__editable__")) continue;
    symlinkSync(join(purelib, name), join(libs, name));
  }
  symlinkSync(join(REPO_ROOT, "server", "chat_history"), join(libs, "chat_history"));
  return ext;
}

function script(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

function rejectsWith(problem: string, check: (error: ServerNotFoundError) => void) {
  return (error: unknown) => {
    assert.ok(error instanceof ServerNotFoundError, `got ${String(error)}`);
    assert.equal(error.problem, problem, error.message);
    check(error);
    return true;
  };
}

test("an explicit interpreter with the server installed is used as it is", async () => {
  const found = await findServer({ pythonPath: PYTHON, pathPythons: NOWHERE });
  assert.equal(found.kind, "setting");
  assert.deepEqual(found.args, ["-m", "chat_history"]);
  assert.deepEqual(found.cliArgs, ["-m", "chat_history.cli"]);
  assert.equal(found.check.ok, true);
});

test("an explicit interpreter that does not exist is named with the setting", async () => {
  await assert.rejects(
    findServer({ pythonPath: "/nonexistent/bin/python3.12" }),
    rejectsWith("interpreterNotFound", (error) => {
      assert.match(error.message, /chatPanel\.pythonPath \("\/nonexistent\/bin\/python3\.12"\)/);
      assert.match(error.message, /ENOENT/);
    }),
  );
});

test("bundled libraries run isolated with the first Python that passes the check, and serve", async (t) => {
  const ext = extensionWithLibs(t);
  const found = await findServer({
    extensionPath: ext,
    pathPythons: [...NOWHERE, { command: pyenv("3.10"), args: [] }, { command: PYTHON, args: [] }],
  });
  assert.equal(found.kind, "bundled");
  assert.equal(found.command, PYTHON);
  assert.deepEqual(found.args, ["-I", "-S", join(ext, "bundled", "boot.py")]);
  assert.deepEqual(found.cliArgs, [...found.args, "cli"]);
  // It really serves: initialize answered, with PYTHONPATH pointing nowhere useful (ignored by -I).
  const server = await startStdioServer({
    command: found.command,
    args: found.args,
    storagePath: join(tempDir(t), "store"),
    env: { ...process.env, PYTHONPATH: "/nonexistent" },
  });
  t.after(() => server.shutdown(3_000));
  assert.equal(server.initializeResult.serverInfo?.name !== undefined, true);
  const cli = execFileSync(found.command, [...found.cliArgs, "--version"], { encoding: "utf8" });
  assert.match(cli, /chat-history \d/);
});

test("only a Python 3.10: the bundled route says it is too old, and what to do", async (t) => {
  const ext = extensionWithLibs(t);
  const old = pyenv("3.10");
  await assert.rejects(
    findServer({ extensionPath: ext, pathPythons: [...NOWHERE, { command: old, args: [] }], platform: "linux" }),
    rejectsWith("pythonTooOld", (error) => {
      assert.match(error.message, /Python 3\.10\.\d+ .* is too old/);
      assert.match(error.message, /needs Python 3\.11 or newer/);
      assert.match(error.message, /Select Python/);
      assert.deepEqual(error.attempts.map((a) => a.problem), ["interpreterNotFound", "interpreterNotFound", "pythonTooOld"]);
    }),
  );
});

test("a Python the bundle has no compiled module for is told so", async (t) => {
  const ext = extensionWithLibs(t); // apsw built for this venv's 3.11 only
  await assert.rejects(
    findServer({ extensionPath: ext, pathPythons: [{ command: pyenv("3.12"), args: [] }] }),
    rejectsWith("nativeModuleMissing", (error) => {
      assert.match(error.message, /compiled SQLite module/);
      assert.match(error.message, /Python 3\.11 to 3\.14/);
    }),
  );
});

test("no Python at all: one message naming what was looked for", async (t) => {
  const ext = extensionWithLibs(t);
  await assert.rejects(
    findServer({ extensionPath: ext, pathPythons: NOWHERE, platform: "linux" }),
    rejectsWith("noPython", (error) => {
      assert.match(error.message, /No Python 3\.11 or newer was found/);
      assert.match(error.message, /python3\.14 … python3\.11, python3 and python on PATH/);
    }),
  );
});

test("the Windows Store stub is recognised", async (t) => {
  const ext = extensionWithLibs(t);
  const stub = script(
    tempDir(t),
    "python3",
    'echo "Python was not found; run without arguments to install from the Microsoft Store, or disable this shortcut from Settings > Manage App Execution Aliases." >&2; exit 9009',
  );
  await assert.rejects(
    findServer({ extensionPath: ext, pathPythons: [{ command: stub, args: [] }], platform: "win32" }),
    rejectsWith("storeStub", (error) => {
      assert.match(error.message, /Microsoft Store's placeholder/);
      assert.match(error.message, /python\.org/);
    }),
  );
});

test("a frozen server inside the extension comes before the bundled libraries", async (t) => {
  const ext = extensionWithLibs(t);
  const frozen = script(
    join(ext, "server"),
    "chat-history-server",
    `echo '{"ok": true, "version": "0.1.0", "python": "3.11.7", "sqlite": "3.54.1", "problem": null, "reason": null}'`,
  );
  const found = await findServer({ extensionPath: ext, pathPythons: [{ command: PYTHON, args: [] }], platform: "linux" });
  assert.equal(found.kind, "frozen");
  assert.equal(found.command, frozen);
  assert.deepEqual(found.args, []);
  assert.deepEqual(found.cliArgs, ["cli"]);
});

test("a frozen server that fails its check gives way to the bundled libraries", async (t) => {
  const ext = extensionWithLibs(t);
  script(join(ext, "server"), "chat-history-server", "echo 'version GLIBC_2.28 not found' >&2; exit 255");
  const found = await findServer({ extensionPath: ext, pathPythons: [{ command: PYTHON, args: [] }], platform: "linux" });
  assert.equal(found.kind, "bundled");
});

test("a frozen server that fails, with nothing else, says so", async (t) => {
  const ext = tempDir(t, "chat-history-ext-");
  script(join(ext, "server"), "chat-history-server", "echo 'version GLIBC_2.28 not found' >&2; exit 255");
  await assert.rejects(
    findServer({ extensionPath: ext, pathPythons: NOWHERE, platform: "linux" }),
    rejectsWith("checkFailed", (error) => {
      assert.match(error.message, /The server inside the extension/);
      assert.match(error.message, /GLIBC_2\.28 not found/);
    }),
  );
});

test("an explicit Python without the server runs the bundled libraries", async (t) => {
  const ext = extensionWithLibs(t);
  const bare = await findServer({ extensionPath: ext, pythonPath: bareVenvPython(t), pathPythons: NOWHERE });
  assert.equal(bare.kind, "bundled");
  assert.deepEqual(bare.args.slice(0, 2), ["-I", "-S"]);
});

test("an explicit system Python that refuses pip is not told to pip install", async (t) => {
  const fake = script(
    tempDir(t),
    "python3",
    `case "$*" in
  *"-m chat_history"*) echo "/usr/bin/python3: No module named chat_history" >&2; exit 1 ;;
  *EXTERNALLY-MANAGED*) echo True ;;
esac`,
  );
  await assert.rejects(
    findServer({ pythonPath: fake, pathPythons: NOWHERE }),
    rejectsWith("externallyManaged", (error) => {
      assert.match(error.message, /refuses `pip install`/);
      assert.match(error.message, /virtual environment/);
    }),
  );
});

/** A venv of the same Python without the server or its dependencies. */
function bareVenvPython(t: TestContext): string {
  const dir = tempDir(t, "chat-history-bare-");
  const base = execFileSync(PYTHON, ["-c", "import sys; print(sys._base_executable)"], { encoding: "utf8" }).trim();
  execFileSync(base, ["-m", "venv", "--without-pip", dir]);
  return join(dir, "bin", "python");
}
