import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { readWorkspaceFile } from "../src/tools";

function workspace(t: TestContext): { root: string; ws: string } {
  const root = mkdtempSync(join(tmpdir(), "chat-panel-tools-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const ws = join(root, "ws");
  mkdirSync(join(ws, "src"), { recursive: true });
  writeFileSync(join(ws, "src", "main.py"), "print('hi')\n");
  writeFileSync(join(root, "secret.txt"), "TOP SECRET\n");
  return { root, ws };
}

test("reads a workspace file by relative or absolute path", async (t) => {
  const { ws } = workspace(t);
  assert.equal(await readWorkspaceFile([ws], { path: "src/main.py" }), "print('hi')\n");
  assert.equal(await readWorkspaceFile([ws], { path: join(ws, "src", "main.py") }), "print('hi')\n");
  assert.equal(await readWorkspaceFile([ws], '{"path": "x"}'), "Error: read_file needs a `path` (a string).");
});

test("nothing outside the workspace: .., absolute paths and symlinks are refused", async (t) => {
  const { root, ws } = workspace(t);
  symlinkSync(join(root, "secret.txt"), join(ws, "link.txt"));
  symlinkSync(root, join(ws, "up"));
  for (const path of ["../secret.txt", join(root, "secret.txt"), "link.txt", "up/secret.txt", "src/../../secret.txt"]) {
    const answer = await readWorkspaceFile([ws], { path });
    assert.match(answer, /outside the workspace/, path);
    assert.doesNotMatch(answer, /TOP SECRET/, path);
  }
  // A sibling folder whose name starts with the workspace's is outside too.
  mkdirSync(`${ws}-evil`);
  writeFileSync(join(`${ws}-evil`, "x.txt"), "evil");
  assert.match(await readWorkspaceFile([ws], { path: `../ws-evil/x.txt` }), /outside the workspace/);
});

test("size limit, directories, binaries and missing files answer as text", async (t) => {
  const { ws } = workspace(t);
  writeFileSync(join(ws, "big.txt"), "a".repeat(100));
  const big = await readWorkspaceFile([ws], { path: "big.txt" }, 10);
  assert.ok(big.startsWith("aaaaaaaaaa\n[… cut: the file has 100 bytes, only the first 10 are shown]"), big);
  assert.match(await readWorkspaceFile([ws], { path: "src" }), /not a file/);
  writeFileSync(join(ws, "bin.dat"), Buffer.from([1, 0, 2]));
  assert.match(await readWorkspaceFile([ws], { path: "bin.dat" }), /binary/);
  assert.match(await readWorkspaceFile([ws], { path: "nope.txt" }), /does not exist/);
  assert.match(await readWorkspaceFile([], { path: "a" }), /no workspace folder/);
});
