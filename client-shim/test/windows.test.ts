/** Version 3, several windows on one conversation: onChanged, expectedLastId and 1003 as
 * ConversationChangedError, over two real server processes on one storage folder. */

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ConversationChangedError, ErrorCodes, toChatHistoryError } from "../src/client";
import type { ChangedNotification } from "../src/types";
import { startServer, tempDir, turn, until } from "./helpers";

test("a stale rewind rejects with ConversationChangedError and the other window hears of the turn", async (t) => {
  const storagePath = join(tempDir(t), "store");
  const one = await startServer(t, { storagePath, workspace: "ws-windows" });
  const two = await startServer(t, { storagePath, workspace: "ws-windows" });
  const heardByTwo: ChangedNotification[] = [];
  const heardByOne: ChangedNotification[] = [];
  two.client.onChanged((event) => heardByTwo.push(event));
  one.client.onChanged((event) => heardByOne.push(event));

  await one.client.append({ conversationId: "c", messages: turn(1) });
  const shown = (await two.client.get({ conversationId: "c" })).messages;
  const newer = await one.client.append({ conversationId: "c", messages: turn(2) });
  const newest = newer.messages[newer.messages.length - 1]!.id;

  await until(() => heardByTwo.some((e) => e.lastId === newest), 2_500, "chatHistory/changed within 2 s");
  assert.deepEqual(heardByTwo[heardByTwo.length - 1], {
    workspace: "ws-windows",
    conversationId: "c",
    lastId: newest,
    reason: "append",
  });

  const lastSeen = shown[shown.length - 1]!.id;
  await assert.rejects(
    two.client.truncate({ conversationId: "c", fromId: lastSeen, expectedLastId: lastSeen }),
    (error: unknown) => {
      assert.ok(error instanceof ConversationChangedError);
      assert.equal(error.code, ErrorCodes.ConversationChanged);
      assert.equal(error.lastId, newest);
      assert.equal(error.method, "chatHistory/truncate");
      return true;
    },
  );
  await assert.rejects(
    two.client.editMessage({ conversationId: "c", id: lastSeen, content: "x", expectedLastId: lastSeen }),
    ConversationChangedError,
  );
  await assert.rejects(
    two.client.deleteTurns({ conversationId: "c", turns: [1], expectedLastId: null }),
    ConversationChangedError,
  );
  assert.equal((await one.client.get({ conversationId: "c" })).messages.length, 4, "nothing deleted");

  // With the current id the rewind runs; the first window hears of it, the second does not.
  const done = await two.client.truncate({ conversationId: "c", fromId: newest, expectedLastId: newest });
  assert.equal(done.deletedMessages, 1);
  await until(() => heardByOne.some((e) => e.reason === "delete"), 2_500, "the rewind told to the first window");
  await new Promise((r) => setTimeout(r, 1_500));
  assert.ok(!heardByTwo.some((e) => e.reason === "delete"), "own writes are never told");
});

test("1003 maps to ConversationChangedError with lastId, null included", () => {
  const error = toChatHistoryError({ code: 1003, message: "changed", data: { lastId: null } }, "chatHistory/deleteTurns");
  assert.ok(error instanceof ConversationChangedError);
  assert.equal(error.lastId, null);
});
