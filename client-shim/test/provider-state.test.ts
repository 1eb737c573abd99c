/** Version 5, provider state that stays valid, over the real server: origins on the typed
 * append / endReply and in StoredMessage, the typed saveCompaction and reportProviderError (one
 * report, then the next prepare carries none of the refused state), and InvalidParamsError
 * naming the field of a bad origin. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidParamsError } from "../src/client";
import type { OpenAIResponsesBody } from "../src/types";
import { startServer } from "./helpers";

const SONNET = "claude-sonnet-4-5-20250929";
const SETTINGS = {
  providers: {
    work: { provider: "anthropic" as const, model: SONNET, endpoint: "https://gateway.example/anthropic", stateScope: "team-a" },
  },
};
const THINKING = { anthropic: { thinking: [{ type: "thinking", thinking: "t", signature: "s" }] } };

function thinkingBlocks(body: unknown): number {
  return JSON.stringify(body).split('"type":"thinking"').length - 1;
}

test("origins are stored, returned and decide where thinking goes; one report fences it", async (t) => {
  const { client } = await startServer(t, { settings: SETTINGS });
  const appended = await client.append({
    conversationId: "c",
    messages: [
      { role: "user", content: "q" },
      { role: "assistant", content: "a", providerData: THINKING, originAlias: "work" },
    ],
  });
  assert.equal(appended.messages[0]!.origin, null);
  assert.deepEqual(appended.messages[1]!.origin, {
    provider: "anthropic",
    model: SONNET,
    endpoint: "https://gateway.example/anthropic",
    scope: "team-a",
  });
  const atWork = await client.prepare({ conversationId: "c", provider: "work" });
  assert.equal(thinkingBlocks(atWork.body), 1);
  const elsewhere = await client.prepare({ conversationId: "c", provider: "anthropic", model: SONNET });
  assert.equal(thinkingBlocks(elsewhere.body), 0);

  const report = await client.reportProviderError({
    conversationId: "c",
    provider: "work",
    status: 400,
    body: { type: "error", error: { type: "invalid_request_error", message: "messages.1.content.0: Invalid `signature` in `thinking` block" } },
  });
  assert.deepEqual(report, { fenced: 1, reason: "thinking_signature" });
  const after = await client.prepare({ conversationId: "c", provider: "work" });
  assert.equal(thinkingBlocks(after.body), 0);
  assert.deepEqual(await client.reportProviderError({ conversationId: "c", provider: "work", status: 429, body: "slow down" }), {
    fenced: 0,
    reason: null,
  });
});

test("a reply ends with its origin; a native compaction stands in where it was minted", async (t) => {
  const { client } = await startServer(t);
  const stored = await client.append({
    conversationId: "c",
    messages: [
      { role: "user", content: "old question" },
      { role: "assistant", content: "old answer" },
      { role: "user", content: "new question" },
    ],
  });
  const row = await client.beginReply({ conversationId: "c", message: { content: "" } });
  const ended = await client.endReply({
    conversationId: "c",
    id: row.id,
    status: "complete",
    content: "new answer",
    origin: { provider: "openai-responses", model: "gpt-5.2" },
  });
  assert.deepEqual(ended.message?.origin, { provider: "openai-responses", model: "gpt-5.2", endpoint: "https://api.openai.com/v1", scope: null });

  const item = { type: "compaction", id: "cmp_1", encrypted_content: "gAAAA" };
  const saved = await client.saveCompaction({
    conversationId: "c",
    coversThroughId: stored.messages[1]!.id,
    items: [item],
    origin: { provider: "openai-responses", model: "gpt-5.2" },
  });
  assert.equal(saved.coversThroughId, stored.messages[1]!.id);
  const minted = await client.prepare({ conversationId: "c", provider: "openai-responses", model: "gpt-5.2" });
  const input = (minted.body as OpenAIResponsesBody).input;
  assert.deepEqual(input[0], item);
  assert.ok(!JSON.stringify(input).includes("old question"));
  const other = await client.prepare({ conversationId: "c", provider: "openai-responses", model: "gpt-4.1" });
  assert.ok(JSON.stringify(other.body).includes("old question"));
});

test("a bad origin is InvalidParamsError naming its field", async (t) => {
  const { client } = await startServer(t);
  await assert.rejects(
    client.append({ conversationId: "c", messages: [{ role: "user", content: "q", originAlias: "nowhere" }] }),
    (error: unknown) => error instanceof InvalidParamsError && error.field === "messages[0].originAlias",
  );
});
