/**
 * The shim's `IMPORT_SOURCES` is the server's `chat_history.importers.SOURCES` (one entry per
 * importer module, in the spec's order), so a source added on one side fails here until the
 * other has it.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { IMPORT_SOURCES } from "../src/types";
import { PYTHON } from "./helpers";

test("IMPORT_SOURCES equals the server's list", () => {
  const script = "import json; from chat_history.importers import SOURCES; print(json.dumps(SOURCES))";
  const result = spawnSync(PYTHON, ["-c", script], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  assert.deepEqual([...IMPORT_SOURCES], JSON.parse(result.stdout));
});
