/**
 * Replies stored while they stream (protocol version 4, `storeReplies`): src/chat.ts against the
 * real history server over stdio and the fake model server (a test double in three wire
 * formats). A cut or stopped reply stays stored, interrupted; Continue streams into the same
 * row and the model receives the partial reply last, never a user message nobody wrote; a
 * second server on the same database (another window) sees the reply grow.
 */

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test, type TestContext } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { startStdioServer, type ChangedNotification } from "chat-history-client";
import { InterruptedReply, runTurn, settleCutReply, type TurnEvent, type TurnOptions } from "../src/chat";
import { READ_FILE_TOOL } from "../src/tools";
import { startFakeModelServer } from "../e2e/fake-model-server.mjs";

const REPO = resolve(__dirname, "..", "..", "..", "..");
const VENV_PYTHON = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.CHAT_HISTORY_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");
const BASE_PATH = { openai: "/v1", anthropic: "", ollama: "" } as const;

async function setup(t: TestContext, kind: keyof typeof BASE_PATH = "openai") {
  const root = mkdtempSync(join(tmpdir(), "chat-panel-replies-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const start = () => startStdioServer({ command: PYTHON, args: ["-m", "chat_history"], storagePath: join(root, "store"), workspace: "w" });
  const server = await start();
  t.after(() => server.shutdown());
  const fake = await startFakeModelServer({ chunkDelayMs: 0 });
  t.after(() => fake.close());
  const events: TurnEvent[] = [];
  const options = (extra: Partial<TurnOptions> = {}): TurnOptions => ({
    client: server.client,
    conversationId: "c",
    // A Claude model that takes a prefill: the server sends any other Anthropic model the note.
    model: { kind, baseUrl: `${fake.url}${BASE_PATH[kind]}`, model: kind === "anthropic" ? "claude-sonnet-4-5" : "fake-model", maxOutputTokens: 100 },
    historyProvider: kind,
    tools: [READ_FILE_TOOL],
    runTool: async () => "Hello from a workspace file.\n",
    fetch,
    on: (e) => events.push(e),
    storeReplies: true,
    ...extra,
  });
  return { server, fake, events, options, start };
}

const rows = async (server: Awaited<ReturnType<typeof startStdioServer>>) =>
  (await server.client.get({ conversationId: "c" })).messages.map((m) => [m.role, m.status, m.content]);

test("storeReplies: a tool round and its reply are stored through beginReply/endReply, complete, in order", async (t) => {
  const { server, events, options } = await setup(t);
  await runTurn(options(), "Please read hello.txt");
  assert.deepEqual(await rows(server), [
    ["user", "complete", "Please read hello.txt"],
    ["assistant", "complete", ""],
    ["tool", "complete", "Hello from a workspace file.\n"],
    ["assistant", "complete", "The file says: **Hello from a workspace file.**"],
  ]);
  const begun = events.filter((e) => e.type === "replyBegun");
  assert.equal(begun.length, 2, "each model answer began a streaming row");
  const { messages } = await server.client.get({ conversationId: "c" });
  assert.deepEqual(messages[1].toolCalls.map((c) => c.name), ["read_file"]);
  assert.deepEqual(begun.map((e) => (e.type === "replyBegun" ? e.row.id : 0)), [messages[1].id, messages[3].id], "the bubble's id is the stored row's");
});

test("storeReplies: a reply that ends without a finish reason stays stored, interrupted, with its text", async (t) => {
  const { server, options } = await setup(t);
  await assert.rejects(runTurn(options(), "Tell me [cut-text]"), (error: unknown) => {
    assert.ok(error instanceof InterruptedReply);
    assert.equal(error.why, "unfinished");
    assert.equal(error.stored?.status, "interrupted");
    assert.match(error.message, /What arrived is saved\./);
    return true;
  });
  assert.deepEqual(await rows(server), [
    ["user", "complete", "Tell me [cut-text]"],
    ["assistant", "interrupted", "This reply stops in the middle of"],
  ]);
});

test("openai: Continue sends the partial reply as the history's last message (no invented prompt) and streams into the same row", async (t) => {
  const { server, fake, options } = await setup(t, "openai");
  await assert.rejects(runTurn(options(), "Tell me [cut-text]"), InterruptedReply);
  const cut = (await server.client.get({ conversationId: "c" })).messages[1];
  const before = fake.requests.length;
  await runTurn(options(), "", { continueId: cut.id });
  const sent = fake.requests[before].body.messages;
  assert.deepEqual(sent.map((m) => m.role), ["user", "assistant"], "the body ends with the partial reply");
  assert.equal(sent.at(-1)!.content, "This reply stops in the middle of");
  const { messages } = await server.client.get({ conversationId: "c" });
  assert.deepEqual(
    messages.map((m) => [m.id, m.status, m.content]),
    [
      [messages[0].id, "complete", "Tell me [cut-text]"],
      [cut.id, "complete", "This reply stops in the middle of and that is the rest of the reply."],
    ],
  );
});

test("anthropic: Stop keeps the reply interrupted; Continue prefills it (trailing space cut, not doubled) into the same row", async (t) => {
  const { server, fake, options } = await setup(t, "anthropic");
  const stop = new AbortController();
  let deltas = 0;
  const running = runTurn(
    options({
      signal: stop.signal,
      on: (e) => {
        if (e.type === "delta" && ++deltas === 4) stop.abort();
      },
    }),
    "Tell me a long story [slow]",
  );
  await assert.rejects(running, (error: unknown) => {
    // Said whole when it fails (seen once in CI, beside pytest: "unfinished", nothing stored).
    const seen = `${String(error)}; deltas ${deltas}; model requests ${fake.requests.length}`;
    assert.ok(error instanceof InterruptedReply, seen);
    assert.equal(error.why, "stopped", seen);
    assert.notEqual(error.stored, null, seen);
    return true;
  });
  const cut = (await server.client.get({ conversationId: "c" })).messages[1];
  assert.equal(cut.status, "interrupted");
  assert.match(cut.content, /^A slow .*\s$/, "what arrived, ending in a space (as a prefill may not)");
  const before = fake.requests.length;
  await runTurn(options(), "", { continueId: cut.id });
  const sent = fake.requests[before].body.messages;
  assert.deepEqual(sent.map((m) => m.role), ["user", "assistant"], "a prefill: the partial reply is the final message");
  const prefill = sent.at(-1)!.content;
  const prefillText = typeof prefill === "string" ? prefill : (prefill as { text: string }[]).map((b) => b.text).join("");
  assert.equal(prefillText, cut.content.trimEnd(), "the trailing whitespace is not sent");
  const { messages } = await server.client.get({ conversationId: "c" });
  assert.equal(messages.length, 2);
  assert.equal(messages[1].id, cut.id);
  assert.equal(messages[1].status, "complete");
  assert.equal(messages[1].content, `${cut.content.trimEnd()} and that is the rest of the reply.`);
});

test("a reply is read whole when the history server is slow to store its row and the garbage collector runs meanwhile", async (t) => {
  // Node's fetch cancels the body of a Response that was collected: the panel held only the body
  // while beginReply ran, and on a loaded machine the reply arrived as nothing ("unfinished").
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const { server, options } = await setup(t, "anthropic");
  const client = server.client;
  const slowBegin = new Proxy(client, {
    get(target, property, receiver) {
      if (property === "beginReply") {
        return async (params: Parameters<typeof client.beginReply>[0]) => {
          for (let i = 0; i < 3; i++) {
            gc();
            await new Promise((r) => setTimeout(r, 30));
          }
          return target.beginReply(params);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  await runTurn(options({ client: slowBegin }), "Tell me something");
  assert.deepEqual(await rows(server), [
    ["user", "complete", "Tell me something"],
    ["assistant", "complete", "Reply #1 to: Tell me something\n\nSome *Markdown*: `code` and a list:\n- one\n- two"],
  ]);
});

test("a second window (another server on the database) hears reason reply while the reply grows, and reads it growing", async (t) => {
  const { options, start } = await setup(t);
  const other = await start();
  t.after(() => other.shutdown());
  const seen: string[] = [];
  const heard: ChangedNotification[] = [];
  other.client.onChanged((event) => {
    heard.push(event);
    void other.client.get({ conversationId: "c" }).then((page) => {
      const reply = page.messages.find((m) => m.role === "assistant");
      if (reply) seen.push(`${reply.status}:${reply.content}`);
    });
  });
  await runTurn(options({ model: { ...options().model } }), "Tell me a long story [slow]");
  await new Promise((r) => setTimeout(r, 2500));
  assert.ok(heard.some((e) => e.reason === "reply"), JSON.stringify(heard.map((e) => e.reason)));
  const growing = seen.filter((s) => s.startsWith("streaming:")).map((s) => s.slice("streaming:".length));
  assert.ok(growing.length >= 2, `several partial texts seen: ${growing.length}`);
  for (let i = 1; i < growing.length; i++) assert.ok(growing[i].startsWith(growing[i - 1]), "each a prefix of the next");
  assert.ok(seen.at(-1)!.startsWith("complete:A slow reply to"), seen.at(-1));
});

test("the history server killed mid-reply: the model is no longer read, and a new server ends the row at once, interrupted, as far as it was stored (issue 43 item 14)", async (t) => {
  const { server, events, options, start } = await setup(t);
  let deltas = 0;
  const running = runTurn(
    options({
      on: (e) => {
        events.push(e);
        // A few words in (at least one update stored), the history server is killed.
        if (e.type === "delta" && ++deltas === 20) server.process.kill("SIGKILL");
      },
    }),
    "Tell me a long story [slow]",
  );
  let unsettled: InterruptedReply["unsettled"] = null;
  await assert.rejects(running, (error: unknown) => {
    assert.ok(error instanceof InterruptedReply);
    assert.equal(error.stored, null);
    unsettled = error.unsettled;
    return true;
  });
  assert.ok(unsettled !== null, "the turn names the row it could not end");
  const { rowId } = unsettled as { rowId: number; error: unknown };
  // The model's stream is cut with the store: no word arrives any more.
  const seen = events.filter((e) => e.type === "delta").length;
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(events.filter((e) => e.type === "delta").length, seen, "the reply stopped growing");
  // A new server (the language client's restart): the dead writer's row streams until its lease
  // ends (20 s); the panel ends it now.
  const next = await start();
  t.after(() => next.shutdown());
  const before = (await next.client.get({ conversationId: "c" })).messages;
  assert.deepEqual(before.map((m) => [m.role, m.status]), [["user", "complete"], ["assistant", "streaming"]]);
  const stored = before[1].content;
  assert.ok(stored.length > 20 && `A slow reply to: Tell me a long story [slow]\n\n${"word ".repeat(200)}`.startsWith(stored), `some of the reply was stored: ${JSON.stringify(stored)}`);
  const began = Date.now();
  const row = await settleCutReply(next.client, "c", rowId, { model: "fake-model" });
  assert.ok(Date.now() - began < 5_000, "at once, not after the lease");
  assert.equal(row?.status, "interrupted");
  assert.equal(row?.content, stored, "exactly what was stored, nothing that was only shown");
  assert.deepEqual(row?.metadata, { model: "fake-model" });
  const after = (await next.client.get({ conversationId: "c" })).messages;
  assert.deepEqual(after.map((m) => [m.id, m.role, m.status, m.content]), [
    [before[0].id, "user", "complete", "Tell me a long story [slow]"],
    [row!.id, "assistant", "interrupted", stored],
  ]);
  // Continue works on it now (an interrupted newest row); a second settle changes nothing.
  const prepared = await next.client.prepare({ conversationId: "c", provider: "openai", model: "fake-model", continueId: row!.id });
  const last = (prepared.body as { messages: { role: string; content: unknown }[] }).messages.at(-1)!;
  assert.deepEqual([last.role, String(last.content).trim()], ["assistant", stored.trim()], "the body ends with the reply as stored");
  assert.deepEqual(await settleCutReply(next.client, "c", row!.id), row, "ended already: nothing changes");
  assert.equal((await next.client.get({ conversationId: "c" })).messages.length, 2);
});
