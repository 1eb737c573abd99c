/** Settings through workspace/configuration, didChangeConfiguration and initializationOptions. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { answerConfiguration, type ShowMessageParams } from "../src/stdio";
import type { ChatHistorySettings } from "../src/types";
import { startServer, turn, until } from "./helpers";

test("answerConfiguration answers like VS Code: one value per item, by dotted section", () => {
  const section = { maxMessages: 2, context: { maxHistoryTurns: 3 } };
  assert.deepEqual(
    answerConfiguration(
      [{ section: "chatHistory" }, { section: "chatHistory.context" }, { section: "chatHistory.context.maxHistoryTurns" }, { section: "other" }, {}],
      section,
    ),
    [section, { maxHistoryTurns: 3 }, 3, null, { chatHistory: section }],
  );
});

test("the server pulls workspace/configuration after initialized and applies the answer", async (t) => {
  let current: ChatHistorySettings = { maxMessages: 2 };
  const server = await startServer(t, {
    // initializationOptions.settings would keep 50 messages; the configuration answer says 2.
    settings: { maxMessages: 50 },
    configuration: () => current,
  });
  await until(() => server.configurationRequests.length >= 1, 5_000, "workspace/configuration after initialized");
  assert.deepEqual(server.configurationRequests[0], { items: [{ section: "chatHistory" }], answer: [{ maxMessages: 2 }] });

  const { client } = server;
  await client.append({ conversationId: "cfg", messages: turn(1) });
  const pruned = await client.append({ conversationId: "cfg", messages: turn(2) });
  assert.deepEqual(pruned.pruned?.reasons, ["count"], "maxMessages 2 from the configuration answer applies");

  // didChangeConfiguration without the section: the server asks again.
  current = { maxMessages: 50 };
  await server.didChangeConfiguration();
  await until(() => server.configurationRequests.length >= 2, 5_000, "workspace/configuration after didChangeConfiguration");
  assert.deepEqual(server.configurationRequests[1]!.answer, [{ maxMessages: 50 }]);
  const kept = await client.append({ conversationId: "cfg", messages: turn(3) });
  assert.equal(kept.pruned, null, "maxMessages 50 now");

  // didChangeConfiguration with the section (vscode-languageclient's synchronize.configurationSection): used directly.
  await server.didChangeConfiguration({ maxMessages: 2 });
  const again = await client.append({ conversationId: "cfg", messages: turn(4) });
  assert.deepEqual(again.pruned, { droppedMessages: 4, droppedTurns: 2, retainedTurns: 1, reasons: ["count"], droppedBranches: 0 });
  assert.equal(server.configurationRequests.length, 2, "a pushed section needs no pull");
});

test("a null configuration answer keeps initializationOptions.settings", async (t) => {
  const server = await startServer(t, { settings: { maxMessages: 2 }, configuration: () => null });
  await until(() => server.configurationRequests.length >= 1, 5_000, "workspace/configuration");
  assert.deepEqual(server.configurationRequests[0]!.answer, [null]);
  await server.client.append({ conversationId: "init", messages: turn(1) });
  const second = await server.client.append({ conversationId: "init", messages: turn(2) });
  assert.deepEqual(second.pruned?.reasons, ["count"]);
});

test("an invalid settings value is reported once as a warning and replaced by its default", async (t) => {
  const shown: ShowMessageParams[] = [];
  const server = await startServer(t, {
    settings: { maxMessages: -1, maxTokens: 20 },
    onShowMessage: (params) => shown.push(params),
  });
  await until(() => server.configurationRequests.length >= 1, 5_000, "workspace/configuration");
  await until(() => shown.length >= 1, 5_000, "window/showMessage");
  const warning = shown.find((m) => m.message.includes("maxMessages"));
  assert.ok(warning, `a message naming maxMessages, got ${JSON.stringify(shown)}`);
  assert.equal(warning.type, 2, "Warning");
  assert.match(warning.message, /-1/);
  assert.match(warning.message, /50/, "names the default used instead");
  assert.equal(shown.filter((m) => m.message.includes("maxMessages")).length, 1, "reported once");

  // The other key still applies (maxTokens 20) and the server keeps serving.
  await server.client.append({ conversationId: "bad", messages: turn(1) });
  const second = await server.client.append({ conversationId: "bad", messages: turn(2) });
  assert.deepEqual(second.pruned?.reasons, ["tokens"]);
});
