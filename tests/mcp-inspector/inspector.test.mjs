// chat-history mcp through the MCP Inspector's command-line mode (npx @modelcontextprotocol/inspector
// --cli), the tool an MCP server author checks a server with: tools/list and a call of each tool
// against a real SQLite file. CHAT_HISTORY_PYTHON: a Python with chat-history-server installed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const python = process.env.CHAT_HISTORY_PYTHON ?? "python3";
const workspace = "file:///work/inspected";
const inspector = createRequire(import.meta.url).resolve(
  "@modelcontextprotocol/inspector/clients/launcher/build/index.js",
);

const folder = mkdtempSync(join(tmpdir(), "mcp-inspector-"));
const db = join(folder, "history.sqlite3");
execFileSync(python, [join(here, "seed.py"), db, workspace]);

function inspect(...args) {
  const out = execFileSync(
    process.execPath,
    [inspector, "--cli", python, "-m", "chat_history.cli", "--db", db, "mcp",
      "--workspace", workspace, ...args],
    { encoding: "utf8", timeout: 60_000 },
  );
  return JSON.parse(out);
}

test.after(() => rmSync(folder, { recursive: true, force: true }));

test("tools/list shows the three read-only tools with their schemas", () => {
  const { tools } = inspect("--method", "tools/list");
  assert.deepEqual(tools.map((t) => t.name), ["search_history", "list_conversations", "read_conversation"]);
  for (const tool of tools) {
    assert.equal(tool.annotations.readOnlyHint, true);
    assert.equal(tool.outputSchema.type, "object");
  }
});

test("search_history finds the decision", () => {
  const result = inspect("--method", "tools/call", "--tool-name", "search_history",
    "--tool-arg", "query=backoff jitter");
  assert.equal(result.isError ?? false, false);
  assert.equal(result.structuredContent.results[0].conversationId, "retry");
  assert.match(result.content[0].text, /backoff/);
});

test("list_conversations and read_conversation answer structured content and text", () => {
  const listed = inspect("--method", "tools/call", "--tool-name", "list_conversations");
  assert.deepEqual(listed.structuredContent.conversations.map((c) => c.conversationId), ["retry"]);
  const read = inspect("--method", "tools/call", "--tool-name", "read_conversation",
    "--tool-arg", "conversationId=retry");
  assert.equal(read.structuredContent.rows.length, 2);
  assert.match(read.content[0].text, /exponential backoff/);
});

test("an unknown conversation is a tool error (isError), not a protocol error or a crash", () => {
  // The Inspector's CLI exits 1 on a tool error and prints its own summary of it.
  assert.throws(
    () => inspect("--method", "tools/call", "--tool-name", "read_conversation",
      "--tool-arg", "conversationId=nope"),
    (error) => `${error.stdout}${error.stderr}`.includes("\"code\":\"tool_is_error\""),
  );
  // and the server went on: a fresh call answers
  assert.equal(inspect("--method", "tools/list").tools.length, 3);
});
