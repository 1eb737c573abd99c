/**
 * package.json `contributes.configuration` is generated from ../settings.schema.json and must not
 * drift; the `ChatHistorySettings` type names exactly the schema's keys.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import type { ChatHistorySettings } from "../src/types";
import { REPO_ROOT, SHIM_ROOT, tempDir } from "./helpers";

const SCRIPT = join(SHIM_ROOT, "scripts", "gen-contributes.mjs");
const SCHEMA = join(REPO_ROOT, "settings.schema.json");

function runScript(...args: string[]) {
  return spawnSync(process.execPath, [SCRIPT, ...args], { encoding: "utf8" });
}

test("package.json contributes.configuration equals settings.schema.json", () => {
  const result = runScript("--check");
  assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
  const pkg = JSON.parse(readFileSync(join(SHIM_ROOT, "package.json"), "utf8"));
  const schema = JSON.parse(readFileSync(SCHEMA, "utf8"));
  assert.deepEqual(pkg.contributes.configuration.properties, schema.properties);
  assert.equal(pkg.contributes.configuration.title, schema.title);
});

test("the check fails on drift and the generator repairs it", (t) => {
  const pkgPath = join(tempDir(t), "package.json");
  const pkg = JSON.parse(readFileSync(join(SHIM_ROOT, "package.json"), "utf8"));
  pkg.contributes.configuration.properties["chatHistory.maxMessages"].default = 99;
  delete pkg.contributes.configuration.properties["chatHistory.maxTokens"];
  pkg.contributes.configuration.properties["chatHistory.stale"] = { type: "boolean", default: false };
  writeFileSync(pkgPath, JSON.stringify(pkg));

  const check = runScript("--check", "--package", pkgPath);
  assert.equal(check.status, 1);
  assert.match(check.stderr, /differs chatHistory\.maxMessages/);
  assert.match(check.stderr, /missing chatHistory\.maxTokens/);
  assert.match(check.stderr, /extra chatHistory\.stale/);

  assert.equal(runScript("--package", pkgPath).status, 0);
  const repaired = runScript("--check", "--package", pkgPath);
  assert.equal(repaired.status, 0, repaired.stderr);
  assert.equal(JSON.parse(readFileSync(pkgPath, "utf8")).name, pkg.name, "the rest of package.json is kept");
});

test("an array of configuration blocks: only the schema's block is written and checked", (t) => {
  const pkgPath = join(tempDir(t), "package.json");
  const own = { title: "My Extension", properties: { "myExt.model": { type: "string", default: "m" } } };
  writeFileSync(pkgPath, JSON.stringify({ name: "my-ext", contributes: { configuration: [own] } }));

  const missing = runScript("--check", "--package", pkgPath);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /no contributes\.configuration block titled "Chat History"/);

  assert.equal(runScript("--package", pkgPath).status, 0);
  const written = JSON.parse(readFileSync(pkgPath, "utf8"));
  const schema = JSON.parse(readFileSync(SCHEMA, "utf8"));
  assert.equal(written.contributes.configuration.length, 2);
  assert.deepEqual(written.contributes.configuration[0], own, "the extension's own block is kept as it was");
  assert.deepEqual(written.contributes.configuration[1].properties, schema.properties);
  assert.equal(runScript("--check", "--package", pkgPath).status, 0);

  // Drift inside the schema's block is found; the extension's own keys never count as extra.
  written.contributes.configuration[1].properties["chatHistory.maxMessages"].default = 7;
  writeFileSync(pkgPath, JSON.stringify(written));
  const drifted = runScript("--check", "--package", pkgPath);
  assert.equal(drifted.status, 1);
  assert.match(drifted.stderr, /differs chatHistory\.maxMessages/);
  assert.doesNotMatch(drifted.stderr, /myExt/);
  assert.equal(runScript("--package", pkgPath).status, 0);
  const repaired = JSON.parse(readFileSync(pkgPath, "utf8"));
  assert.equal(repaired.contributes.configuration.length, 2, "the block is replaced in place, not appended again");
  assert.equal(runScript("--check", "--package", pkgPath).status, 0);
});

// Every settings key as a dotted path of ChatHistorySettings; the compiler checks this object has
// exactly the type's leaves, the test checks they are exactly the schema's keys.
type Leaves<T, Prefix extends string = ""> = {
  [K in keyof T & string]-?: NonNullable<T[K]> extends object
    ? K extends "providers"
      ? `${Prefix}${K}`
      : Leaves<NonNullable<T[K]>, `${Prefix}${K}.`>
    : `${Prefix}${K}`;
}[keyof T & string];

const TYPED_KEYS: Record<Leaves<ChatHistorySettings>, true> = {
  enableAutoPruning: true,
  maxAgeHours: true,
  maxMessages: true,
  maxTokens: true,
  maxInactiveBranches: true,
  preserveSystemMessages: true,
  maxToolResultChars: true,
  "context.maxContextTokens": true,
  "context.compactRatio": true,
  "context.historyPruning.enabled": true,
  "context.historyPruning.maxTokens": true,
  "context.maxHistoryTurns": true,
  "context.keepToolContextTurns": true,
  "context.trimLowWater": true,
  "context.preset": true,
  "context.promptCache": true,
  "context.compaction.enabled": true,
  "context.compaction.triggerRatio": true,
  "context.compaction.keepRecentTurns": true,
  "context.compaction.maxSummaryTokens": true,
  "context.compaction.prompt": true,
  activeProvider: true,
  providers: true,
  workspaceIdentity: true,
};

test("the ChatHistorySettings type has exactly the schema's keys", () => {
  const schema = JSON.parse(readFileSync(SCHEMA, "utf8"));
  const schemaKeys = Object.keys(schema.properties).map((key) => key.replace(/^chatHistory\./, ""));
  assert.deepEqual(Object.keys(TYPED_KEYS).sort(), schemaKeys.sort());
});
