/**
 * The MCP recall server as the panel offers it (src/mcp.ts): the launch is the panel's own CLI
 * command with `mcp`, for each kind of server the launcher finds, and that launch, run for real,
 * answers an MCP client's initialize and tools/list (newline-delimited JSON on stdio).
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import * as M from "../src/mcp";

const REPO = resolve(__dirname, "..", "..", "..", "..");
const VENV_PYTHON = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.CHAT_HISTORY_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");

test("the launch is the panel's CLI command with mcp after the storage arguments", () => {
  const frozen = M.mcpLaunch({ command: "/ext/server/chat-history-server", cliArgs: ["cli"] }, ["--db", "/s"]);
  assert.deepEqual(frozen, { command: "/ext/server/chat-history-server", args: ["cli", "--db", "/s", "mcp"] });
  const bundled = M.mcpLaunch({ command: "python3.12", cliArgs: ["-I", "-S", "/ext/bundled/boot.py", "cli"] }, []);
  assert.deepEqual(bundled.args, ["-I", "-S", "/ext/bundled/boot.py", "cli", "mcp"]);
  const database = M.mcpLaunch({ command: "py", cliArgs: ["-3.12", "-m", "chat_history.cli"] }, ["--database", "host=h dbname=d"]);
  assert.deepEqual(database.args, ["-3.12", "-m", "chat_history.cli", "--database", "host=h dbname=d", "mcp"]);
});

test("the copied configuration holds each agent's form with the same command", () => {
  const launch = { command: "C:\\Program Files\\x\\server.exe", args: ["cli", "mcp"] };
  const parsed = JSON.parse(M.mcpConfiguration(launch));
  const forms = Object.values(parsed) as Record<string, Record<string, { command: string; args: string[]; type?: string }>>[];
  assert.equal(forms.length, 3);
  assert.deepEqual(parsed["VS Code (.vscode/mcp.json)"].servers["chat-history"], { type: "stdio", ...launch });
  assert.deepEqual(parsed["Claude Code, Cline, Cursor (mcpServers)"].mcpServers["chat-history"], launch);
  assert.equal(parsed["Zed (settings.json)"].context_servers["chat-history"].command, launch.command);
});

test("the launch, run, serves the three tools to an MCP client", async (t) => {
  const storage = mkdtempSync(join(tmpdir(), "panel-mcp-"));
  t.after(() => rmSync(storage, { recursive: true, force: true }));
  const launch = M.mcpLaunch({ command: PYTHON, cliArgs: ["-m", "chat_history.cli"] }, ["--db", storage]);
  const child = spawn(launch.command, [...launch.args, "--workspace", "file:///panel/test"], { stdio: ["pipe", "pipe", "inherit"] });
  t.after(() => child.kill());
  const lines = createInterface({ input: child.stdout });
  const answers = new Map<number, (value: any) => void>();
  lines.on("line", (line) => {
    const message = JSON.parse(line);
    answers.get(message.id)?.(message);
  });
  const ask = (id: number, method: string, params: unknown) =>
    new Promise<any>((resolve) => {
      answers.set(id, resolve);
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  const init = await ask(1, "initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "panel-test", version: "1" },
  });
  assert.equal(init.result.serverInfo.name, "chat-history");
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  const listed = await ask(2, "tools/list", {});
  assert.deepEqual(listed.result.tools.map((tool: { name: string }) => tool.name), ["search_history", "list_conversations", "read_conversation"]);
  const called = await ask(3, "tools/call", { name: "list_conversations", arguments: {} });
  assert.deepEqual(called.result.structuredContent.conversations, []);
  child.stdin.end();
});
