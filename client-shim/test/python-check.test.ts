/** checkPythonServer: the pre-flight `<python> -c "import chat_history"` of startChatHistoryServer. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { checkPythonServer, installHint, ServerLaunchError } from "../src/python";
import { PYTHON } from "./helpers";

test("an interpreter with the package passes", async () => {
  await checkPythonServer(PYTHON);
});

test("a missing interpreter is named, with the pip install hint", async () => {
  const missing = "/nonexistent/bin/python3.99";
  await assert.rejects(checkPythonServer(missing), (error: unknown) => {
    assert.ok(error instanceof ServerLaunchError, `got ${String(error)}`);
    assert.equal(error.problem, "interpreterNotFound");
    assert.equal(error.pythonPath, missing);
    assert.ok(error.message.includes(`"${missing}"`), error.message);
    assert.ok(error.message.includes("pip install chat-history-server"), error.message);
    return true;
  });
});

test("an interpreter without the package is named, with the pip install command for it", async () => {
  await assert.rejects(checkPythonServer(PYTHON, { module: "chat_history_not_installed" }), (error: unknown) => {
    assert.ok(error instanceof ServerLaunchError, `got ${String(error)}`);
    assert.equal(error.problem, "packageMissing");
    assert.ok(error.message.includes(`"${PYTHON}"`), error.message);
    assert.match(error.message, /No module named/);
    assert.ok(error.message.includes(installHint(PYTHON)), error.message);
    return true;
  });
});

test("installHint quotes paths with spaces", () => {
  assert.equal(installHint("python3"), "python3 -m pip install chat-history-server");
  assert.equal(installHint("/opt/my python/bin/python"), '"/opt/my python/bin/python" -m pip install chat-history-server');
});
