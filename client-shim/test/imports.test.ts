/** `importFrom` (version 4, "History from other tools") through ChatHistoryClient against the real server. */

import assert from "node:assert/strict";
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { IMPORT_SOURCES, type PlannedImport } from "../src/types";
import { REPO_ROOT, startServer, tempDir } from "./helpers";

const FIXTURE = join(REPO_ROOT, "tests", "fixtures", "imports", "claude-code", "-home-me-shop");
const SESSION = "7f3c2a10-5b1e-4c2d-9e8f-0a1b2c3d4e5f";
/** Every field of an entry, as the shim's PlannedImport names them. */
const ENTRY_FIELDS: (keyof PlannedImport)[] = [
  "beside",
  "conversationId",
  "messages",
  "newMessages",
  "oldest",
  "retention",
  "skipped",
  "source",
  "sourceId",
  "status",
  "title",
  "workspace",
  "workspaceFrom",
];

test("importFrom previews a Claude Code session of the folder, imports it, and finds nothing of a tool with no data folder", async (t) => {
  const root = tempDir(t);
  const project = join(root, "work", "shop");
  mkdirSync(project, { recursive: true });
  const home = join(root, "home");
  // Claude Code's folder name for a project: every non-alphanumeric character as "-".
  const store = join(home, ".claude", "projects", project.replace(/[^A-Za-z0-9]/g, "-"));
  mkdirSync(store, { recursive: true });
  writeFileSync(join(store, `${SESSION}.jsonl`), readFileSync(join(FIXTURE, `${SESSION}.jsonl`), "utf8").replaceAll("/home/me/shop", project));
  cpSync(join(FIXTURE, SESSION), join(store, SESSION), { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, ".config"), XDG_DATA_HOME: join(home, ".local", "share") };
  for (const name of ["CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "CONTINUE_GLOBAL_DIR", "COPILOT_HOME"]) delete env[name];
  const folder = pathToFileURL(project).href;
  const { client } = await startServer(t, { env, workspaceFolders: [{ uri: folder, name: "shop" }], settings: { maxAgeHours: 0 } });

  const preview = await client.importFrom({ source: "claude-code" });
  const main = preview.conversations.find((c) => c.sourceId === SESSION);
  assert.ok(main, JSON.stringify(preview));
  assert.deepEqual(Object.keys(main).sort(), ENTRY_FIELDS);
  assert.equal(main.status, "new");
  assert.equal(main.workspace, folder);
  assert.equal(main.workspaceFrom, "recorded");
  assert.equal(main.beside, null);
  assert.equal(main.retention, null, "maxAgeHours 0: nothing expires");
  assert.deepEqual((await client.listConversations({})).conversations, [], "a dry run writes nothing");

  const done = await client.importFrom({ source: "claude-code", dryRun: false });
  assert.deepEqual(done.conversations.map((c) => c.status), preview.conversations.map(() => "new"));
  const listed = await client.listConversations({});
  const info = listed.conversations.find((c) => c.conversationId === `claude-code:${SESSION}`);
  assert.deepEqual(info?.metadata, { import: { source: "claude-code", session: SESSION } });

  for (const source of IMPORT_SOURCES.filter((s) => s !== "claude-code")) {
    const none = await client.importFrom({ source });
    assert.deepEqual(none.conversations, [], source);
    assert.ok(Array.isArray(none.warnings), source);
  }
});
