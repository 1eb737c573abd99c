/**
 * A panel that calls `get` the moment the server has started (e.g. restoring its view in
 * `activate`) never races the settings: the server waits for the editor's answer to
 * `workspace/configuration`, however late it comes, before it runs (or prunes) anything.
 */

import { settings, Uri } from "./fake-vscode"; // must come first: installs `vscode`
import assert from "node:assert/strict";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import type * as vscode from "vscode";
import type { ChatHistorySettings } from "../src/types";
import { startChatHistoryServer } from "../src/vscode";
import { PYTHON, startServer, tempDir, turn, within } from "./helpers";

/** 60 rows: 10 more than the default maxMessages (50) keeps. */
const TURNS = 30;

async function seed(t: TestContext, storagePath: string): Promise<void> {
  const server = await startServer(t, { storagePath, settings: { enableAutoPruning: false } });
  for (let i = 0; i < TURNS; i++) await server.client.append({ conversationId: "panel", messages: turn(i) });
  await server.shutdown(5_000);
}

function late<T>(value: T, ms = 500): Promise<T> {
  return new Promise((resolve) => setTimeout(() => resolve(value), ms));
}

for (const [pulled, rows] of [
  [{ enableAutoPruning: false }, 2 * TURNS],
  [{ maxMessages: 4 }, 4],
] as [ChatHistorySettings, number][]) {
  test(`startStdioServer: get right after start runs under the late answer ${JSON.stringify(pulled)}`, async (t) => {
    const storagePath = join(tempDir(t), "store");
    await seed(t, storagePath);
    const server = await startServer(t, { storagePath, configuration: () => late(pulled) });
    const first = await within(server.client.get({ conversationId: "panel" }), 30_000, "get");
    assert.equal(first.messages.length, rows);
    assert.equal(server.configurationRequests.length, 1);
    assert.deepEqual(server.configurationRequests[0]!.answer, [pulled]);
  });
}

test("startChatHistoryServer: get in activate, with the editor answering workspace/configuration late", async (t) => {
  const storage = join(tempDir(t), "globalStorage");
  await seed(t, storage);
  settings["chatHistory"] = { enableAutoPruning: false };
  t.after(() => delete settings["chatHistory"]);
  const context = { globalStorageUri: Uri.file(storage) as unknown as vscode.Uri, subscriptions: [] };
  const server = await within(
    startChatHistoryServer(context, {
      pythonPath: PYTHON,
      clientOptions: {
        middleware: {
          // The editor is slow both ways: the pushed section and the pulled answer come late.
          workspace: {
            configuration: async (params, token, next) => late(await next(params, token)),
            didChangeConfiguration: async (sections, next) => {
              await late(undefined);
              await next(sections);
            },
          },
        },
      },
    }),
    30_000,
    "startChatHistoryServer",
  );
  t.after(() => server.dispose());
  const first = await within(server.client.get({ conversationId: "panel" }), 30_000, "get");
  assert.equal(first.messages.length, 2 * TURNS, "the defaults (maxMessages 50) would have deleted 10 rows");
  assert.equal(first.pruned, null);
});
