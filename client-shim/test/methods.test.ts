/** Every request method through ChatHistoryClient against the real server (protocol.md, Requests). */

import assert from "node:assert/strict";
import { test } from "node:test";
import { PROVIDER_KINDS, type Message, type StoredMessage } from "../src/types";
import { rowTokens, startServer, sumTokens, textOf, turn } from "./helpers";

function assertStoredShape(row: StoredMessage): void {
  // Every field present; absent optional fields filled in (protocol.md, StoredMessage).
  assert.equal(typeof row.id, "number");
  assert.ok(Number.isInteger(row.id));
  assert.ok(Number.isInteger(row.turn));
  assert.ok(Number.isInteger(row.tokens));
  assert.equal(typeof row.content, "string");
  assert.ok(Array.isArray(row.toolCalls));
  assert.ok(Array.isArray(row.attachments));
  assert.equal(typeof row.metadata, "object");
  assert.notEqual(row.metadata, null);
  assert.equal(typeof row.providerData, "object");
  assert.notEqual(row.providerData, null);
  assert.ok("toolCallId" in row, "toolCallId present");
  assert.ok("name" in row, "name present");
  assert.equal(typeof row.timestamp, "number");
}

test("initialize advertises capabilities.experimental.chatHistory", async (t) => {
  const server = await startServer(t);
  assert.deepEqual(server.capabilities, { protocolVersion: 5, providers: [...PROVIDER_KINDS] });
});

test("append stores rows one for one and get returns them with every field", async (t) => {
  const { client } = await startServer(t);
  const isoTime = new Date(Date.now() - 60_000).toISOString();
  const messages: Message[] = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "héllo wörld", timestamp: isoTime, metadata: { source: "test", n: [1, 2] } },
    {
      role: "assistant",
      content: null,
      toolCalls: [{ id: "call_1", name: "read_file", arguments: { path: "a.py" } }],
    },
    { role: "tool", content: "print('hi')", toolCallId: "call_1", name: "read_file" },
    { role: "assistant", content: "It prints hi." },
  ];
  const appended = await client.append({ conversationId: "c1", messages });
  assert.equal(appended.pruned, null);
  assert.equal(appended.messages.length, messages.length);
  appended.messages.forEach(assertStoredShape);

  const ids = appended.messages.map((m) => m.id);
  assert.deepEqual([...ids].sort((a, b) => a - b), ids, "ids increase in insertion order");
  assert.deepEqual(appended.messages.map((m) => m.role), ["system", "user", "assistant", "tool", "assistant"]);
  assert.deepEqual(appended.messages.map((m) => m.turn), [0, 1, 1, 1, 1]);

  const [system, user, carrier, tool, reply] = appended.messages as [StoredMessage, StoredMessage, StoredMessage, StoredMessage, StoredMessage];
  assert.equal(user.timestamp, Date.parse(isoTime), "an ISO timestamp comes back as epoch ms");
  assert.deepEqual(user.metadata, { source: "test", n: [1, 2] });
  assert.equal(user.tokens, rowTokens("héllo wörld"));
  assert.equal(system.toolCallId, null);
  assert.equal(system.name, null);
  assert.deepEqual(system.toolCalls, []);
  assert.deepEqual(system.attachments, []);
  assert.deepEqual(system.metadata, {});
  assert.deepEqual(system.providerData, {});
  assert.equal(carrier.content, "", "a null carrier content is stored as an empty string");
  assert.deepEqual(carrier.toolCalls, [{ id: "call_1", name: "read_file", arguments: { path: "a.py" } }]);
  assert.equal(
    carrier.tokens,
    rowTokens('[{"id":"call_1","name":"read_file","arguments":{"path":"a.py"}}]'),
    "a carrier's estimate counts its tool calls as compact JSON",
  );
  assert.equal(tool.toolCallId, "call_1");
  assert.equal(tool.name, "read_file");
  assert.equal(reply.content, "It prints hi.");

  const got = await client.get({ conversationId: "c1" });
  assert.deepEqual(got.messages, appended.messages);
  assert.equal(got.summary, null);
  assert.equal(got.pruned, null);
  assert.equal(got.hasMore, false);
});

test("get pages with limit and beforeId; hasMore says whether older rows exist", async (t) => {
  const { client } = await startServer(t);
  const { messages } = await client.append({ conversationId: "paged", messages: [...turn(1), ...turn(2), ...turn(3)] });
  const ids = messages.map((m) => m.id);

  const newest = await client.get({ conversationId: "paged", limit: 2 });
  assert.deepEqual(newest.messages.map((m) => m.id), ids.slice(4));
  assert.equal(newest.hasMore, true);

  const older = await client.get({ conversationId: "paged", limit: 2, beforeId: ids[4] });
  assert.deepEqual(older.messages.map((m) => m.id), ids.slice(2, 4));
  assert.equal(older.hasMore, true);

  const oldest = await client.get({ conversationId: "paged", limit: 5, beforeId: ids[2] });
  assert.deepEqual(oldest.messages.map((m) => m.id), ids.slice(0, 2));
  assert.equal(oldest.hasMore, false);

  const unknown = await client.get({ conversationId: "never-used" });
  assert.deepEqual(unknown, { messages: [], summary: null, pruned: null, hasMore: false }, "an unknown conversation is empty");
});

test("format returns the provider's body shape for a kind (openai, anthropic)", async (t) => {
  const { client } = await startServer(t);
  await client.append({
    conversationId: "fmt",
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Read a.py" },
      { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "read_file", arguments: { path: "a.py" } }] },
      { role: "tool", content: "x = 1", toolCallId: "call_1", name: "read_file" },
      { role: "assistant", content: "It sets x." },
    ],
  });

  const openai = await client.format({ conversationId: "fmt", provider: "openai", model: "gpt-x" });
  assert.equal(openai.provider, "openai");
  assert.equal(openai.model, "gpt-x");
  assert.deepEqual(Object.keys(openai.body), ["messages"]);
  const rows = openai.body.messages as Record<string, any>[];
  assert.deepEqual(rows.map((r) => r["role"]), ["system", "user", "assistant", "tool", "assistant"]);
  assert.equal(textOf(rows[0]!["content"]), "Be brief.");
  assert.equal(rows[2]!["tool_calls"][0]["id"], "call_1");
  assert.equal(rows[2]!["tool_calls"][0]["type"], "function");
  assert.equal(rows[2]!["tool_calls"][0]["function"]["name"], "read_file");
  assert.deepEqual(JSON.parse(rows[2]!["tool_calls"][0]["function"]["arguments"]), { path: "a.py" });
  assert.equal(rows[3]!["tool_call_id"], "call_1");

  const anthropic = await client.format({ conversationId: "fmt", provider: "anthropic" });
  assert.match(openai.cacheKey, /^[0-9a-f]{32}$/);
  assert.equal(anthropic.cacheKey, openai.cacheKey, "one cacheKey per conversation");
  assert.equal(anthropic.provider, "anthropic");
  assert.equal(anthropic.model, null, "no model requested and no alias: null");
  assert.equal(textOf(anthropic.body.system), "Be brief.");
  const turns = anthropic.body.messages as Record<string, any>[];
  assert.equal(turns[0]!["role"], "user");
  const toolUse = turns.flatMap((m) => (Array.isArray(m["content"]) ? m["content"] : [])).find((b: any) => b.type === "tool_use");
  assert.deepEqual(toolUse && { id: toolUse.id, name: toolUse.name, input: toolUse.input }, {
    id: "call_1",
    name: "read_file",
    input: { path: "a.py" },
  });
});

test("prepare reports estimate, budget, window and trimming; extraTokens counts", async (t) => {
  const { client } = await startServer(t);
  const { messages } = await client.append({ conversationId: "prep", messages: [...turn(1), ...turn(2)] });
  const prepared = await client.prepare({ conversationId: "prep", provider: "openai" });
  const formatted = await client.format({ conversationId: "prep", provider: "openai" });
  assert.equal(prepared.cacheKey, formatted.cacheKey, "prepare and format share the cacheKey");
  assert.notEqual(prepared.cacheKey, (await client.format({ conversationId: "fmt" })).cacheKey);
  assert.equal(prepared.provider, "openai");
  assert.equal(prepared.model, null);
  assert.equal((prepared.body.messages as unknown[]).length, 4);
  assert.equal(prepared.estimatedTokens, sumTokens(messages));
  assert.equal(prepared.budget, 32_000, "default budget with an unknown window");
  assert.equal(prepared.contextWindow, null, "a kind named directly has an unknown window");
  assert.equal(prepared.trimmed, null);
  assert.equal(prepared.collapsedToolRows, 0);
  assert.equal(prepared.collapsedTurns, 0);

  const withExtra = await client.prepare({ conversationId: "prep", provider: "openai", extraTokens: 100 });
  assert.equal(withExtra.estimatedTokens, prepared.estimatedTokens + 100);

  const tool = { name: "read_file", description: "Read a file", parameters: { type: "object" } };
  const withTools = await client.prepare({ conversationId: "prep", provider: "openai", tools: [tool] });
  assert.equal(
    withTools.estimatedTokens,
    prepared.estimatedTokens + rowTokens(tool.name + tool.description + JSON.stringify(tool.parameters)),
  );
});

test("prepare through an alias reports its model and context window", async (t) => {
  const { client } = await startServer(t, {
    settings: { providers: { big: { provider: "anthropic", model: "claude-test", contextWindow: 200_000 } } },
  });
  await client.append({ conversationId: "alias", messages: turn(1) });
  const prepared = await client.prepare({ conversationId: "alias", provider: "big" });
  assert.equal(prepared.provider, "big", "provider echoes the alias name");
  assert.equal(prepared.model, "claude-test");
  assert.equal(prepared.contextWindow, 200_000);
  assert.ok(Array.isArray(prepared.body["messages"]), "an anthropic-shaped body");
});

test("saveSummary and getSummary; get carries the summary", async (t) => {
  const { client } = await startServer(t);
  assert.equal(await client.getSummary({ conversationId: "sum" }), null);
  const { messages } = await client.append({ conversationId: "sum", messages: turn(1) });
  const before = Date.now();
  const saved = await client.saveSummary({ conversationId: "sum", summary: "We said hello.", coversThroughId: messages[1]!.id });
  assert.equal(saved.summary, "We said hello.");
  assert.equal(saved.coversThroughId, messages[1]!.id);
  assert.ok(Number.isInteger(saved.updatedAt) && saved.updatedAt >= before - 1000, "updatedAt is epoch ms");
  assert.deepEqual(await client.getSummary({ conversationId: "sum" }), saved);
  assert.deepEqual((await client.get({ conversationId: "sum" })).summary, saved);

  const replaced = await client.saveSummary({ conversationId: "sum", summary: "Replaced." });
  assert.equal(replaced.coversThroughId, null, "coversThroughId omitted: null");
  assert.deepEqual(await client.getSummary({ conversationId: "sum" }), replaced);
});

test("listConversations lists per workspace, newest activity first", async (t) => {
  const { client } = await startServer(t, { workspace: "file:///ws-main" });
  const a = await client.append({ conversationId: "a", messages: turn(1) });
  await new Promise((r) => setTimeout(r, 20));
  const b = await client.append({ conversationId: "b", messages: [...turn(1), ...turn(2)] });
  await client.saveSummary({ conversationId: "b", summary: "two turns" });
  await client.append({ conversationId: "elsewhere", workspace: "file:///ws-other", messages: turn(1) });

  const listed = await client.listConversations();
  assert.deepEqual(
    listed.conversations.map(({ conversationId, messageCount, tokens, hasSummary }) => ({ conversationId, messageCount, tokens, hasSummary })),
    [
      { conversationId: "b", messageCount: 4, tokens: sumTokens(b.messages), hasSummary: true },
      { conversationId: "a", messageCount: 2, tokens: sumTokens(a.messages), hasSummary: false },
    ],
  );
  for (const c of listed.conversations) assert.ok(Number.isInteger(c.lastActivity) && (c.lastActivity ?? 0) > 1.6e12, "lastActivity is epoch ms");

  const other = await client.listConversations({ workspace: "file:///ws-other" });
  assert.deepEqual(other.conversations.map((c) => c.conversationId), ["elsewhere"]);
  const explicitMain = await client.listConversations({ workspace: "file:///ws-main" });
  assert.deepEqual(explicitMain.conversations.map((c) => c.conversationId), ["b", "a"], "the session workspace is the default");
});

test("clear deletes messages and summary of one conversation", async (t) => {
  const { client } = await startServer(t);
  await client.append({ conversationId: "gone", messages: [...turn(1), ...turn(2)] });
  await client.saveSummary({ conversationId: "gone", summary: "s" });
  await client.append({ conversationId: "kept", messages: turn(1) });

  assert.deepEqual(await client.clear({ conversationId: "gone" }), { deletedMessages: 4 });
  assert.deepEqual(await client.get({ conversationId: "gone" }), { messages: [], summary: null, pruned: null, hasMore: false });
  assert.equal(await client.getSummary({ conversationId: "gone" }), null);
  assert.equal((await client.get({ conversationId: "kept" })).messages.length, 2);
  assert.deepEqual(await client.clear({ conversationId: "gone" }), { deletedMessages: 0 });
  assert.deepEqual((await client.listConversations()).conversations.map((c) => c.conversationId), ["kept"]);
});
