/** The chatHistory/trimmed notification through ChatHistoryClient.onTrimmed (protocol.md, Notification). */

import assert from "node:assert/strict";
import { test } from "node:test";
import type { TrimmedNotification } from "../src/types";
import { startServer, sumTokens, turn, until } from "./helpers";

test("storage retention (maxMessages 2) prunes whole turns and notifies scope storage, reason count", async (t) => {
  const server = await startServer(t, { settings: { maxMessages: 2 }, workspace: "ws-trim" });
  const { client } = server;
  const events: TrimmedNotification[] = [];
  const subscription = client.onTrimmed((event) => events.push(event));

  const first = await client.append({ conversationId: "t", messages: turn(1) });
  assert.equal(first.pruned, null);
  const second = await client.append({ conversationId: "t", messages: turn(2) });
  assert.deepEqual(second.pruned, { droppedMessages: 2, droppedTurns: 1, retainedTurns: 1, reasons: ["count"], droppedBranches: 0 });
  assert.equal(second.messages.length, 2, "the append answers its own rows");

  await until(() => events.length >= 1, 3_000, "chatHistory/trimmed");
  assert.deepEqual(events[0], {
    workspace: "ws-trim",
    conversationId: "t",
    scope: "storage",
    reason: "count",
    droppedMessages: 2,
    droppedTurns: 1,
    retainedTurns: 1,
    tokensBefore: sumTokens(first.messages) + sumTokens(second.messages),
    tokensAfter: sumTokens(second.messages),
    budget: null,
  });

  const third = await client.append({ conversationId: "t", messages: [...turn(3), ...turn(4)] });
  assert.deepEqual(third.pruned, { droppedMessages: 4, droppedTurns: 2, retainedTurns: 1, reasons: ["count"], droppedBranches: 0 });
  assert.equal(third.messages.length, 4, "rows retention deleted in the same request are still answered");
  await until(() => events.length >= 2, 3_000, "second chatHistory/trimmed");
  assert.equal(events.length, 2, "one notification per reason");
  const got = await client.get({ conversationId: "t" });
  assert.deepEqual(got.messages.map((m) => m.content), ["question 4", "answer 4"]);

  // A disposed listener hears nothing more.
  subscription.dispose();
  const late: TrimmedNotification[] = [];
  const other = client.onTrimmed((event) => late.push(event));
  await client.append({ conversationId: "t", messages: turn(5) });
  await until(() => late.length >= 1, 3_000, "trimmed after re-subscribing");
  assert.equal(events.length, 2);
  other.dispose();
});

test("token cap retention notifies reason tokens with the cap as budget", async (t) => {
  const { client } = await startServer(t, { settings: { maxTokens: 20 } });
  const events: TrimmedNotification[] = [];
  client.onTrimmed((event) => events.push(event));
  await client.append({ conversationId: "tok", messages: turn(1) });
  const second = await client.append({ conversationId: "tok", messages: turn(2) });
  assert.deepEqual(second.pruned?.reasons, ["tokens"]);
  await until(() => events.length >= 1, 3_000, "chatHistory/trimmed");
  assert.equal(events[0]!.scope, "storage");
  assert.equal(events[0]!.reason, "tokens");
  assert.equal(events[0]!.budget, 20);
});

test("prepare that drops turns notifies scope request (turnLimit) and leaves storage alone", async (t) => {
  const { client } = await startServer(t, { settings: { context: { maxHistoryTurns: 1 } } });
  const { messages } = await client.append({ conversationId: "req", messages: [...turn(1), ...turn(2), ...turn(3)] });
  const events: TrimmedNotification[] = [];
  client.onTrimmed((event) => events.push(event));

  const prepared = await client.prepare({ conversationId: "req", provider: "openai" });
  assert.deepEqual(
    prepared.trimmed && { ...prepared.trimmed, tokensBefore: 0, tokensAfter: 0 },
    { droppedMessages: 4, droppedTurns: 2, retainedTurns: 1, reason: "turnLimit", tokensBefore: 0, tokensAfter: 0 },
  );
  assert.equal(prepared.trimmed!.tokensBefore, sumTokens(messages));
  const rows = prepared.body.messages as { role: string; content: unknown }[];
  assert.equal(rows.at(-1)!.content, "answer 3");
  assert.ok(JSON.stringify(rows).includes("[earlier turns omitted to fit the context window]"), "breadcrumb row");

  await until(() => events.length >= 1, 3_000, "chatHistory/trimmed");
  assert.equal(events[0]!.scope, "request");
  assert.equal(events[0]!.reason, "turnLimit");
  assert.equal(events[0]!.conversationId, "req");
  assert.equal(events[0]!.droppedTurns, 2);
  assert.equal(events[0]!.budget, null);
  assert.equal((await client.get({ conversationId: "req" })).messages.length, 6, "prepare never deletes stored rows");
});

test("prepare over the token budget drops oldest turns: reason tokenBudget, budget in the event", async (t) => {
  const { client } = await startServer(t, { settings: { context: { maxContextTokens: 30 } } });
  await client.append({ conversationId: "budget", messages: [...turn(1), ...turn(2), ...turn(3)] });
  const events: TrimmedNotification[] = [];
  client.onTrimmed((event) => events.push(event));

  const prepared = await client.prepare({ conversationId: "budget", provider: "openai" });
  assert.equal(prepared.budget, 30);
  assert.equal(prepared.trimmed?.reason, "tokenBudget");
  assert.ok(prepared.estimatedTokens <= 30, `estimate ${prepared.estimatedTokens} fits the budget`);
  assert.equal(prepared.trimmed?.tokensAfter, prepared.estimatedTokens);
  await until(() => events.length >= 1, 3_000, "chatHistory/trimmed");
  assert.deepEqual(
    { scope: events[0]!.scope, reason: events[0]!.reason, budget: events[0]!.budget, droppedTurns: events[0]!.droppedTurns },
    { scope: "request", reason: "tokenBudget", budget: 30, droppedTurns: prepared.trimmed?.droppedTurns },
  );
});

test("prepare with overflowRecovery drops to at most two thirds: reason overflowRecovery", async (t) => {
  const { client } = await startServer(t);
  await client.append({ conversationId: "rec", messages: [...turn(1), ...turn(2), ...turn(3), ...turn(4)] });
  const plain = await client.prepare({ conversationId: "rec", provider: "openai" });
  const events: TrimmedNotification[] = [];
  client.onTrimmed((event) => events.push(event));

  const recovered = await client.prepare({ conversationId: "rec", provider: "openai", overflowRecovery: true });
  assert.equal(recovered.trimmed?.reason, "overflowRecovery");
  assert.ok(recovered.estimatedTokens <= (plain.estimatedTokens * 2) / 3, `${recovered.estimatedTokens} <= 2/3 of ${plain.estimatedTokens}`);
  await until(() => events.length >= 1, 3_000, "chatHistory/trimmed");
  assert.equal(events[0]!.scope, "request");
  assert.equal(events[0]!.reason, "overflowRecovery");
});
