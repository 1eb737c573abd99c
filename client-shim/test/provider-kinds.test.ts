/**
 * The shim's `PROVIDER_KINDS` is the server's `chat_history.settings.PROVIDER_KINDS`, in order, and
 * `ProviderBodies` has a body type for exactly those kinds (checked when this file compiles).
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { PROVIDER_KINDS, type ProviderBodies, type ProviderKind } from "../src/types";
import { PYTHON } from "./helpers";

// Compile-time: a kind without a body type, or a body type for no kind, fails `tsc`.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const bodiesCoverKinds: Same<keyof ProviderBodies, ProviderKind> = true;

test("PROVIDER_KINDS equals the server's list", () => {
  const script = "import json; from chat_history.settings import PROVIDER_KINDS; print(json.dumps(PROVIDER_KINDS))";
  const result = spawnSync(PYTHON, ["-c", script], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  assert.deepEqual([...PROVIDER_KINDS], JSON.parse(result.stdout));
  assert.equal(bodiesCoverKinds, true);
});
