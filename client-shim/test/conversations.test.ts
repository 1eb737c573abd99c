/** Version 2 conversations and edits through ChatHistoryClient against the real server (protocol.md "Version 2"). */

import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidParamsError } from "../src/client";
import type { ConversationInfo } from "../src/types";
import { startServer, sumTokens, turn } from "./helpers";

const INFO_FIELDS = [
  "conversationId",
  "createdAt",
  "hasSummary",
  "lastActivity",
  "messageCount",
  "metadata",
  "title",
  "titleSource",
  "tokens",
  "workspace",
];

test("updateConversation names a conversation and listConversations pages through them", async (t) => {
  const { client } = await startServer(t, { workspace: "file:///ws" });
  for (const id of ["a", "b", "c"]) {
    await client.append({ conversationId: id, messages: turn(1) });
    await new Promise((r) => setTimeout(r, 3)); // distinct activity times (ties order by id)
  }
  const named: ConversationInfo = await client.updateConversation({ conversationId: "a", title: "Alpha", metadata: { pinned: true } });
  assert.deepEqual(Object.keys(named).sort(), INFO_FIELDS);
  assert.equal(named.title, "Alpha");
  assert.equal(named.titleSource, "user");
  assert.deepEqual(named.metadata, { pinned: true });
  assert.equal(named.workspace, "file:///ws");

  const first = await client.listConversations({ limit: 2 });
  assert.deepEqual(first.conversations.map((c) => c.conversationId), ["a", "c"]);
  assert.equal(typeof first.nextCursor, "string");
  const second = await client.listConversations({ limit: 2, cursor: first.nextCursor ?? undefined });
  assert.deepEqual(second.conversations.map((c) => c.conversationId), ["b"]);
  assert.equal(second.nextCursor, null);
  const b = second.conversations[0] as ConversationInfo;
  assert.equal(b.titleSource, "auto");

  const restored = await client.updateConversation({ conversationId: "a", title: null });
  assert.equal(restored.titleSource, "auto");
  await assert.rejects(client.listConversations({ cursor: "nope" }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError);
    assert.equal(error.field, "cursor");
    return true;
  });
  const every = await client.listConversations({ allWorkspaces: true });
  assert.equal(every.conversations.length, 3);
});

test("truncate, deleteTurns, editMessage, fork and deleteSummary", async (t) => {
  const { client } = await startServer(t);
  const stored = (await client.append({ conversationId: "c", messages: [...turn(1), ...turn(2), ...turn(3)] })).messages;
  await client.saveSummary({ conversationId: "c", summary: "s", coversThroughId: stored[1]?.id });

  const edited = await client.editMessage({ conversationId: "c", id: stored[0]!.id, content: "edited", metadata: { v: 2 } });
  assert.equal(edited.content, "edited");
  assert.equal(edited.turn, 1);
  assert.deepEqual(edited.metadata, { v: 2 });

  const fork = await client.fork({ conversationId: "c", newConversationId: "f", throughId: stored[3]!.id });
  assert.equal(fork.messageCount, 4);
  assert.equal(fork.hasSummary, true);
  assert.equal(fork.title, "edited");

  assert.deepEqual(await client.deleteTurns({ conversationId: "c", turns: [2] }), { deletedMessages: 2, deletedTurns: 1 });
  assert.deepEqual(await client.truncate({ conversationId: "c", fromId: stored[1]!.id }), { deletedMessages: 3, summaryDeleted: true });
  const left = (await client.get({ conversationId: "c" })).messages;
  assert.deepEqual(left.map((m) => m.content), ["edited"]);

  assert.deepEqual(await client.deleteSummary({ conversationId: "f" }), { deleted: true });
  assert.deepEqual(await client.deleteSummary({ conversationId: "f" }), { deleted: false });
  const listed = await client.listConversations();
  const f = listed.conversations.find((c) => c.conversationId === "f");
  assert.equal(f?.tokens, sumTokens((await client.get({ conversationId: "f" })).messages));

  await assert.rejects(client.truncate({ conversationId: "c", fromId: 999_999 }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError);
    assert.equal(error.field, "fromId");
    return true;
  });
});

test("moveWorkspace re-keys a workspace's conversations and listWorkspaces lists them (version 3)", async (t) => {
  const { client } = await startServer(t, { workspace: "file:///ws" });
  await client.append({ conversationId: "a", messages: turn(1) });
  await client.append({ conversationId: "b", messages: turn(1), workspace: "file:///C:/old/" });
  const before = await client.listWorkspaces();
  // A request's workspace is normalized as the session's is (Neovim's spelling of c:\old).
  assert.deepEqual(before.workspaces.map((w) => w.workspace).sort(), ["file:///c:/old", "file:///ws"]);
  assert.deepEqual(Object.keys(before.workspaces[0]).sort(), [
    "conversations",
    "folder",
    "folderExists",
    "lastActivity",
    "renamed",
    "repository",
    "workspace",
  ]);
  assert.deepEqual(before.workspaces[0].renamed, []); // none renamed: an empty list
  assert.deepEqual(await client.moveWorkspace({ from: "file:///C:/old/", to: "file:///ws" }), { conversations: 1 });
  const listed = await client.listConversations({});
  assert.deepEqual(listed.conversations.map((c) => c.conversationId).sort(), ["a", "b"]);
  await client.append({ conversationId: "a", messages: turn(1), workspace: "file:///other" });
  await assert.rejects(client.moveWorkspace({ from: "file:///other", to: "file:///ws" }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError);
    assert.equal(error.field, "to");
    return true;
  });
});
