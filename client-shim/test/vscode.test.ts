/**
 * startChatHistoryServer with the real vscode-languageclient LanguageClient and the real server;
 * only the `vscode` module is a stand-in (./fake-vscode), so this runs under plain Node.
 */

import { changeSettings, settings, Uri } from "./fake-vscode"; // must come first: installs `vscode`
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import type * as vscode from "vscode";
import { ConnectionClosedError } from "../src/client";
import { ServerLaunchError } from "../src/python";
import type { TrimmedNotification } from "../src/types";
import { startChatHistoryServer, type ChatHistoryServer } from "../src/vscode";
import { PYTHON, tempDir, turn, until, within } from "./helpers";

function fakeContext(t: TestContext) {
  const storage = join(tempDir(t), "globalStorage");
  const subscriptions: { dispose(): unknown }[] = [];
  const context = { globalStorageUri: Uri.file(storage) as unknown as vscode.Uri, subscriptions };
  return { context, storage, subscriptions };
}

async function start(t: TestContext, context: ReturnType<typeof fakeContext>["context"]): Promise<ChatHistoryServer> {
  const server = await within(startChatHistoryServer(context, { pythonPath: PYTHON }), 30_000, "startChatHistoryServer");
  t.after(() => server.dispose());
  return server;
}

test("starts <python> -m chat_history with storagePath = globalStorageUri.fsPath and serves requests", async (t) => {
  const { context, storage, subscriptions } = fakeContext(t);
  const server = await start(t, context);
  assert.equal(subscriptions.length, 1, "registered for disposal on deactivation");
  const { messages } = await server.client.append({ conversationId: "vs", messages: turn(1) });
  assert.deepEqual((await server.client.get({ conversationId: "vs" })).messages, messages);
  assert.ok(existsSync(storage) && readdirSync(storage).length > 0, "the database lives in the global storage folder");
  assert.deepEqual(server.languageClient.initializeResult?.capabilities.experimental, {
    chatHistory: { protocolVersion: 5, providers: ["openai", "openai-responses", "anthropic", "gemini", "ollama", "mistral", "bedrock", "cohere"] },
  });
});

test("chatHistory settings reach the server and changes apply (synchronize.configurationSection)", async (t) => {
  settings["chatHistory"] = { maxMessages: 2 };
  t.after(() => delete settings["chatHistory"]);
  const { context } = fakeContext(t);
  const server = await start(t, context);
  const events: TrimmedNotification[] = [];
  server.client.onTrimmed((event) => events.push(event));

  await server.client.append({ conversationId: "cfg", messages: turn(1) });
  const second = await server.client.append({ conversationId: "cfg", messages: turn(2) });
  assert.deepEqual(second.pruned?.reasons, ["count"], "maxMessages 2 from the settings");
  await until(() => events.length === 1, 3_000, "chatHistory/trimmed through LanguageClient.onNotification");

  changeSettings("chatHistory", { maxMessages: 50 });
  // The change travels as a notification ahead of the next request.
  const third = await server.client.append({ conversationId: "cfg", messages: turn(3) });
  assert.equal(third.pruned, null, "maxMessages 50 after the change");
});

test("a dead server process rejects the pending request instead of hanging", async (t) => {
  const { context } = fakeContext(t);
  const server = await start(t, context);
  await server.client.append({ conversationId: "c", messages: turn(1) });
  const serverProcess = server.languageClient.serverProcess;
  assert.ok(serverProcess);
  const pending = server.client.get({ conversationId: "c" });
  serverProcess.kill("SIGKILL");
  await within(assert.rejects(pending, ConnectionClosedError), 5_000, "pending request after kill");
});

test("dispose stops the server process", async (t) => {
  const { context } = fakeContext(t);
  const server = await start(t, context);
  const serverProcess = server.languageClient.serverProcess!;
  const exited = new Promise((resolve) => serverProcess.once("exit", (code) => resolve(code)));
  await server.dispose();
  assert.equal(await within(exited, 5_000, "server exit after dispose"), 0);
});

test("a missing interpreter is a clear error naming it, with the pip install hint", async (t) => {
  const { context } = fakeContext(t);
  const missing = "/nonexistent/python3";
  await assert.rejects(startChatHistoryServer(context, { pythonPath: missing }), (error: unknown) => {
    assert.ok(error instanceof ServerLaunchError, `got ${String(error)}`);
    assert.equal(error.problem, "interpreterNotFound");
    assert.ok(error.message.includes(missing));
    assert.match(error.message, /pip install chat-history-server/);
    return true;
  });
});
