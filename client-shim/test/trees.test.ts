/** Version 5, conversation trees, through ChatHistoryClient against the real server: `parentId` on
 * append and beginReply (Regenerate and Edit & resend keep every variant), `parentId` and
 * `siblings` on StoredMessage, the typed switchBranch (ConversationChangedError when stale) and
 * getTree, search's `onActivePath`, changed reason "branch" in another window, and streamReply
 * into a row the caller began. */

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ConversationChangedError, ReplyInProgressError } from "../src/client";
import { streamReply } from "../src/replies";
import { PROTOCOL_VERSION, type ChangedNotification } from "../src/types";
import { startServer, tempDir, until } from "./helpers";

async function* words(...parts: string[]): AsyncGenerator<string> {
  for (const part of parts) yield part;
}

test("Regenerate and Edit & resend make siblings; switchBranch and getTree read the tree", async (t) => {
  const server = await startServer(t);
  assert.equal(server.capabilities?.protocolVersion, PROTOCOL_VERSION);
  const { client } = server;
  const [q, a] = (await client.append({ conversationId: "c", messages: [{ role: "user", content: "question" }, { role: "assistant", content: "first" }] })).messages;
  assert.equal(q!.parentId, null);
  assert.equal(a!.parentId, q!.id);
  assert.deepEqual(a!.siblings, { index: 0, count: 1, ids: [a!.id] });

  // Regenerate: a reply begun after the prompt (prepare reads the new branch: the streaming row
  // is never sent), streamed into that row.
  const begun = await client.beginReply({ conversationId: "c", parentId: q!.id, expectedLastId: a!.id, message: { content: "" } });
  assert.deepEqual(begun.siblings, { index: 1, count: 2, ids: [a!.id, begun.id] });
  const prepared = await client.prepare({ conversationId: "c", provider: "openai" });
  assert.deepEqual(JSON.stringify(prepared.body).includes("first"), false, "the old reply is not sent with the new branch");
  const streamed = await streamReply(client, { conversationId: "c", begun, deltas: words("sec", "ond") });
  assert.equal(streamed.status, "complete");
  assert.equal(streamed.message?.content, "second");
  assert.deepEqual(streamed.message?.siblings.ids, [a!.id, begun.id]);

  // Edit & resend of the first prompt: a new first row.
  const edited = (await client.append({ conversationId: "c", parentId: null, messages: [{ role: "user", content: "question, edited" }] })).messages[0]!;
  assert.deepEqual(edited.siblings, { index: 1, count: 2, ids: [q!.id, edited.id] });
  assert.deepEqual((await client.get({ conversationId: "c" })).messages.map((m) => m.content), ["question, edited"]);

  // Back to the first question: the reply active most recently comes with it.
  const switched = await client.switchBranch({ conversationId: "c", id: q!.id, expectedLastId: edited.id });
  assert.equal(switched.activeLeafId, begun.id);
  assert.deepEqual(switched.messages.map((m) => m.content), ["question", "second"]);
  assert.equal(switched.hasMore, false);
  const paged = await client.switchBranch({ conversationId: "c", id: a!.id, limit: 1 });
  assert.deepEqual(paged.messages.map((m) => m.content), ["first"]);
  assert.equal(paged.hasMore, true);

  // A stale window's switch changes nothing.
  await assert.rejects(
    client.switchBranch({ conversationId: "c", id: begun.id, expectedLastId: edited.id }),
    (error: unknown) => error instanceof ConversationChangedError && error.lastId === a!.id,
  );
  assert.deepEqual((await client.get({ conversationId: "c" })).messages.map((m) => m.content), ["question", "first"]);

  const tree = await client.getTree({ conversationId: "c" });
  assert.deepEqual(
    tree.nodes.map((n) => [n.id, n.parentId, n.role, n.preview, n.children, n.active]),
    [
      [q!.id, null, "user", "question", 2, true],
      [a!.id, q!.id, "assistant", "first", 0, true],
      [begun.id, q!.id, "assistant", "second", 0, false],
      [edited.id, null, "user", "question, edited", 0, false],
    ],
  );
  assert.equal(tree.activeLeafId, a!.id);
  assert.equal(tree.hasMore, false);
  const page = await client.getTree({ conversationId: "c", afterId: a!.id, limit: 1 });
  assert.deepEqual(page.nodes.map((n) => n.id), [begun.id]);
  assert.equal(page.hasMore, true);

  // Search finds every branch and says which hit is on the active path.
  const hits = await client.search({ query: "second", conversationId: "c" });
  assert.deepEqual(hits.results.map((h) => [h.id, h.onActivePath]), [[begun.id, false]]);
});

test("a switch while a reply streams is ReplyInProgressError", async (t) => {
  const { client } = await startServer(t);
  const [q] = (await client.append({ conversationId: "c", messages: [{ role: "user", content: "q" }] })).messages;
  const row = await client.beginReply({ conversationId: "c" });
  await assert.rejects(client.switchBranch({ conversationId: "c", id: q!.id }), (error: unknown) => error instanceof ReplyInProgressError && error.id === row.id);
});

test("another window hears of a switch as changed reason \"branch\"", async (t) => {
  const storagePath = join(tempDir(t), "store");
  const one = await startServer(t, { storagePath, workspace: "file:///ws" });
  const two = await startServer(t, { storagePath, workspace: "file:///ws" });
  const heard: ChangedNotification[] = [];
  two.client.onChanged((event) => heard.push(event));
  const [q, a] = (await one.client.append({ conversationId: "c", messages: [{ role: "user", content: "q" }, { role: "assistant", content: "one" }] })).messages;
  await one.client.append({ conversationId: "c", parentId: q!.id, messages: [{ role: "assistant", content: "two" }] });
  await two.client.get({ conversationId: "c" });
  await until(() => heard.length > 0, 10_000, "the new branch heard");
  const before = heard.length;
  await one.client.switchBranch({ conversationId: "c", id: a!.id });
  await until(() => heard.slice(before).some((e) => e.reason === "branch"), 10_000, "the switch heard");
  assert.deepEqual(heard.slice(before).find((e) => e.reason === "branch"), { workspace: "file:///ws", conversationId: "c", lastId: a!.id, reason: "branch" });
});
