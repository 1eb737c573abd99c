/** Version 4, replies in flight, over the real server: the typed beginReply / updateReply /
 * endReply, ReplyInProgressError (1004), and `streamReply` ending complete, interrupted (an
 * error, an abort) or discarded, flushing at most N times a second. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { ErrorCodes, InvalidParamsError, ReplyInProgressError } from "../src/client";
import { streamReply } from "../src/replies";
import { startServer } from "./helpers";

async function* paced(pieces: string[], everyMs: number, fail?: Error): AsyncIterable<string> {
  for (const piece of pieces) {
    await new Promise((r) => setTimeout(r, everyMs));
    yield piece;
  }
  if (fail) throw fail;
}

test("the typed methods store a reply while it streams; a second begin is ReplyInProgressError", async (t) => {
  const { client } = await startServer(t);
  await client.append({ conversationId: "c", messages: [{ role: "user", content: "why?" }] });
  const row = await client.beginReply({ conversationId: "c", message: { content: "Because" } });
  assert.equal(row.status, "streaming");
  assert.deepEqual(await client.updateReply({ conversationId: "c", id: row.id, contentDelta: " light" }), {
    id: row.id,
    length: 13,
  });
  const shown = (await client.get({ conversationId: "c" })).messages.at(-1)!;
  assert.deepEqual([shown.status, shown.content], ["streaming", "Because light"]);
  await assert.rejects(client.beginReply({ conversationId: "c" }), (error: unknown) => {
    assert.ok(error instanceof ReplyInProgressError);
    assert.equal(error.code, ErrorCodes.ReplyInProgress);
    assert.equal(error.id, row.id);
    return true;
  });
  await assert.rejects(
    client.updateReply({ conversationId: "c", id: row.id, contentDelta: "a", content: "b" }),
    (error: unknown) => error instanceof InvalidParamsError && error.field === "content",
  );
  const ended = await client.endReply({ conversationId: "c", id: row.id, status: "interrupted" });
  assert.deepEqual([ended.message?.status, ended.message?.content], ["interrupted", "Because light"]);
  const again = await client.beginReply({ conversationId: "c", continueId: row.id });
  assert.equal(again.id, row.id);
  await client.endReply({ conversationId: "c", id: row.id, status: "discard" });
  assert.equal((await client.get({ conversationId: "c" })).messages.length, 1);
});

test("streamReply flushes at most N times a second and ends complete", async (t) => {
  const { client } = await startServer(t);
  const pieces = Array.from({ length: 40 }, (_, i) => `w${i} `);
  const flushes: number[] = [];
  const started = Date.now();
  const result = await streamReply(client, {
    conversationId: "c",
    deltas: paced(pieces, 25),
    flushesPerSecond: 4,
    metadata: { model: "m" },
    onFlush: (length) => flushes.push(length),
  });
  const seconds = (Date.now() - started) / 1000;
  assert.equal(result.status, "complete");
  assert.equal(result.message?.content, pieces.join(""));
  assert.deepEqual(result.message?.metadata, { model: "m" });
  assert.ok(flushes.length >= 2, `flushed ${flushes.length} times`);
  assert.ok(flushes.length <= 4 * seconds + 2, `${flushes.length} flushes in ${seconds} s`);
  assert.deepEqual(flushes, [...flushes].sort((a, b) => a - b), "lengths only grow");
});

test("streamReply ends interrupted on an error or an abort, keeping what arrived, and can discard", async (t) => {
  const { client } = await startServer(t);
  const failed = await streamReply(client, {
    conversationId: "e",
    deltas: paced(["one ", "two "], 10, new Error("provider 529")),
  });
  assert.equal(failed.status, "interrupted");
  assert.equal(failed.message?.content, "one two ");
  assert.equal((failed.error as Error).message, "provider 529");

  const controller = new AbortController();
  const aborted = streamReply(client, {
    conversationId: "a",
    deltas: paced(Array.from({ length: 100 }, () => "x"), 20),
    signal: controller.signal,
    onFlush: () => controller.abort(),
  });
  const stopped = await aborted;
  assert.equal(stopped.status, "interrupted");
  const stored = (await client.get({ conversationId: "a" })).messages.at(-1)!;
  assert.equal(stored.status, "interrupted");
  assert.ok(stored.content.length > 0 && stored.content.length < 100, stored.content);

  const discarded = await streamReply(client, {
    conversationId: "d",
    deltas: paced(["  "], 5),
    decide: ({ text }) => (text.trim() === "" ? "discard" : undefined),
  });
  assert.deepEqual([discarded.status, discarded.message], ["discard", null]);
  assert.equal((await client.get({ conversationId: "d" })).messages.length, 0);
});

test("streamReply continues an interrupted reply into the same row", async (t) => {
  const { client } = await startServer(t);
  const first = await streamReply(client, {
    conversationId: "c",
    deltas: paced(["The sky "], 5, new Error("reload")),
  });
  const id = first.message!.id;
  const second = await streamReply(client, { conversationId: "c", continueId: id, deltas: paced(["is blue."], 5) });
  assert.deepEqual([second.message?.id, second.message?.content, second.status], [id, "The sky is blue.", "complete"]);
});
