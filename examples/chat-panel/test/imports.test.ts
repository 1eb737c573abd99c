/**
 * "Import History…" (src/imports.ts): source labels, the QuickPick's rows, the preview's words
 * (skipped items summed, what retention deletes at the next read), and the dry runs against the
 * real history server over stdio (a Claude Code session placed in a fake HOME).
 */

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { IMPORT_SOURCES, startStdioServer, type PlannedImport } from "chat-history-client";
import * as I from "../src/imports";
import * as S from "../src/state";
import * as V from "../src/view";

const REPO = resolve(__dirname, "..", "..", "..", "..");
const VENV_PYTHON = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.CHAT_HISTORY_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");
const DEFAULTS: I.RetentionSettings = { maxAgeHours: 720, maxMessages: 5000, maxTokens: 4_000_000 };

function entry(extra: Partial<PlannedImport>): PlannedImport {
  return {
    source: "claude-code",
    sourceId: "s1",
    conversationId: "claude-code:s1",
    workspace: "file:///shop",
    title: "Fix the test",
    messages: 6,
    newMessages: 6,
    status: "new",
    skipped: [],
    oldest: 1764480000000,
    retention: null,
    workspaceFrom: "recorded",
    beside: null,
    ...extra,
  };
}

test("every source the shim names has a label; an imported conversation's source comes from metadata.import", () => {
  for (const source of IMPORT_SOURCES) assert.notEqual(I.sourceLabel(source), source, source);
  assert.equal(I.sourceLabel("claude-code"), "Claude Code");
  assert.equal(I.sourceLabel("codex"), "Codex");
  assert.equal(I.sourceLabel("some-new-tool"), "some-new-tool");
  assert.equal(I.importedFrom({ metadata: { import: { source: "codex", session: "x" } } }), "Codex");
  assert.equal(I.importedFrom({ metadata: {} }), null);
  assert.equal(I.importedFrom({ metadata: { import: "codex" } }), null);
  assert.equal(I.importedFrom({ metadata: { import: { source: 3 } } }), null);
  assert.equal(I.importedFrom(undefined), null);
  assert.equal(I.importedSource({ metadata: { import: { source: "roo-code" } } }), "roo-code");
  const badges = IMPORT_SOURCES.map(I.sourceBadge);
  assert.equal(new Set(badges).size, IMPORT_SOURCES.length, `one badge per source: ${badges}`);
  assert.ok(badges.every((b) => /^[A-Z]{2}$/.test(b)), String(badges));
  assert.equal(I.sourceBadge("some-new-tool"), "SO");
  assert.equal(V.sourceHint("Claude Code"), "Imported from Claude Code");
  assert.equal(V.viewOf({ ...S.emptyState("c"), source: "Codex" }).source, "Imported from Codex");
  assert.equal(V.viewOf(S.emptyState("c")).source, null);
});

test("the QuickPick row of a source counts its conversations, messages and what is new", () => {
  const item = I.sourceItem({
    source: "claude-code",
    entries: [entry({}), entry({ sourceId: "s2", status: "updated", messages: 10, newMessages: 4 }), entry({ sourceId: "s3", status: "unchanged", messages: 1, newMessages: 0 })],
  });
  assert.deepEqual(item, { label: "Claude Code", description: "3 conversations · 17 messages", detail: "1 new · 1 updated · 1 unchanged" });
});

test("the preview lists the conversations, sums what is skipped and why, and confirms with the count", () => {
  const preview = I.previewOf(
    {
      source: "codex",
      entries: [
        entry({ source: "codex", title: "Add a test", skipped: [{ what: "reasoning", why: "no id", count: 2 }, { what: "image", why: "not carried over", count: 1 }] }),
        entry({ source: "codex", sourceId: "s2", title: null, messages: 3, newMessages: 3, skipped: [{ what: "reasoning", why: "no id", count: 3 }] }),
        entry({ source: "codex", sourceId: "s3", title: "Old one", status: "unchanged", newMessages: 0 }),
      ],
    },
    DEFAULTS,
  );
  assert.equal(preview.message, "Import 2 conversations from Codex?");
  assert.equal(preview.confirm, "Import 2 conversations");
  assert.equal(preview.expiring, 0);
  assert.match(preview.detail, /^3 conversations of this folder, 15 messages: 2 new, 0 updated, 1 unchanged\./);
  assert.match(preview.detail, /• Add a test — 6 messages\n• s2 — 3 messages\n• Old one — already imported/);
  assert.match(preview.detail, /Not carried over:\n• 5 reasoning \(no id\)\n• 1 image \(not carried over\)/);
  assert.doesNotMatch(preview.detail, /retention/);
  const many = I.previewOf({ source: "codex", entries: Array.from({ length: 5 }, (_, i) => entry({ sourceId: `s${i}`, title: `T${i}` })) }, DEFAULTS, 3);
  assert.match(many.detail, /• T2 — 6 messages\n• and 2 more conversations/);
});

test("the preview says how many messages retention deletes at the next read, and why; the button says anyway", () => {
  const preview = I.previewOf(
    {
      source: "claude-code",
      entries: [
        entry({ title: "Old", retention: { droppedMessages: 6, droppedTurns: 1, retainedTurns: 0, reasons: ["age"], droppedBranches: 0 } }),
        entry({ sourceId: "s2", title: "Recent" }),
        entry({ sourceId: "s3", title: "Long", messages: 9000, newMessages: 9000, retention: { droppedMessages: 4000, droppedTurns: 300, retainedTurns: 400, reasons: ["count"], droppedBranches: 0 } }),
      ],
    },
    DEFAULTS,
  );
  assert.equal(preview.expiring, 4006);
  assert.equal(preview.confirm, "Import 3 conversations anyway");
  assert.match(preview.detail, /• Old — 6 messages, 6 deleted at the next read\n• Recent — 6 messages\n• Long — 9,000 messages, 4,000 deleted at the next read/);
  assert.match(
    preview.detail,
    /Your retention settings delete 4,006 messages of 2 conversations at the next read: turns older than 720 hours \(chatHistory\.maxAgeHours\); turns beyond 5,000 messages a conversation \(chatHistory\.maxMessages\)\. To keep them, raise the setting/,
  );
});

test("nothing new to import: no confirmation, the words say they are already imported", () => {
  const preview = I.previewOf({ source: "codex", entries: [entry({ status: "unchanged", newMessages: 0 })] }, DEFAULTS);
  assert.equal(preview.confirm, null);
  assert.equal(preview.message, "Nothing new to import from Codex.");
  assert.equal(I.importedText("codex", [entry({ newMessages: 4, status: "updated" }), entry({ newMessages: 0, status: "unchanged" })]), "Imported 4 messages into 1 conversation from Codex.");
  assert.equal(I.failedText([{ source: "codex", error: "e1" }, { source: "cline", error: "e1" }, { source: "continue", error: "e2" }]), "Codex, Cline: e1\nContinue: e2");
});

test("findSources: a dry run per source against the real server; tools with nothing for this folder are left out, not errors", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "chat-panel-imports-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const project = join(root, "shop");
  mkdirSync(project);
  const home = join(root, "home");
  const store = join(home, ".claude", "projects", project.replace(/[^A-Za-z0-9]/g, "-"));
  mkdirSync(store, { recursive: true });
  const fixture = join(REPO, "tests", "fixtures", "imports", "claude-code", "-home-me-shop", "0b9d4e21-aaaa-4bbb-8ccc-123456789abc.jsonl");
  writeFileSync(join(store, "0b9d4e21-aaaa-4bbb-8ccc-123456789abc.jsonl"), readFileSync(fixture, "utf8").replaceAll("/home/me/shop", project));
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, ".config"), XDG_DATA_HOME: join(home, ".local", "share") };
  for (const name of ["CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "CONTINUE_GLOBAL_DIR", "COPILOT_HOME"]) delete env[name];
  const server = await startStdioServer({
    command: PYTHON,
    args: ["-m", "chat_history"],
    env,
    storagePath: join(root, "store"),
    workspaceFolders: [{ uri: pathToFileURL(project).href, name: "shop" }],
  });
  t.after(() => server.shutdown());
  const { found, failed } = await I.findSources(server.client);
  assert.deepEqual(failed, []);
  assert.deepEqual(found.map((f) => f.source), ["claude-code"]);
  const preview = I.previewOf(found[0]!, DEFAULTS);
  // The fixture's turns are from October 2026, older than the default 720 hours: the server says so.
  assert.ok(preview.expiring > 0, preview.detail);
  assert.match(preview.detail, /turns older than 720 hours/);
  assert.deepEqual((await server.client.listConversations({})).conversations, [], "dry runs write nothing");
});
