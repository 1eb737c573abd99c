/** Typed errors from the real server (protocol.md, Errors). */

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import {
  ChatHistoryError,
  ContextOverflowError,
  InvalidParamsError,
  ServerNotInitializedError,
  StorageError,
} from "../src/client";
import { spawnServer, startStdioServer } from "../src/stdio";
import type { Message } from "../src/types";
import { PYTHON, SERVER_ARGS, startServer, tempDir, turn, within } from "./helpers";

test("InvalidParams names the field: empty conversationId", async (t) => {
  const { client } = await startServer(t);
  await assert.rejects(client.get({ conversationId: "" }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError, `got ${String(error)}`);
    assert.ok(error instanceof ChatHistoryError);
    assert.equal(error.code, -32602);
    assert.equal(error.field, "conversationId");
    assert.equal(error.method, "chatHistory/get");
    assert.match(error.message, /conversationId/);
    return true;
  });
});

test("InvalidParams names nested fields and the request changes nothing", async (t) => {
  const { client } = await startServer(t);
  // A string must match exactly; a tool row answering no call is "the row" (semantics.md), so its index suffices.
  const cases: { params: any; field: string | RegExp }[] = [
    { params: { conversationId: "x".repeat(257), messages: turn(1) }, field: "conversationId" },
    { params: { conversationId: "c", messages: [] }, field: "messages" },
    { params: { conversationId: "c", messages: [...turn(1), { role: "wizard", content: "hi" }] }, field: "messages[2].role" },
    {
      params: { conversationId: "c", messages: [...turn(1), { role: "tool", content: "r", toolCallId: "nope" }] },
      field: /^messages\[2\]/,
    },
    { params: { conversationId: "c", messages: [{ role: "tool", content: "r" }] }, field: "messages[0].toolCallId" },
  ];
  for (const { params, field } of cases) {
    await assert.rejects(client.append(params), (error: unknown) => {
      assert.ok(error instanceof InvalidParamsError, `${JSON.stringify(params).slice(0, 80)}: got ${String(error)}`);
      const what = `field for ${JSON.stringify(params).slice(0, 120)}`;
      if (typeof field === "string") assert.equal(error.field, field, what);
      else assert.match(error.field ?? "", field, what);
      return true;
    });
  }
  await assert.rejects(client.get({ conversationId: "c", limit: 0 }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError);
    assert.equal(error.field, "limit");
    return true;
  });
  const tooMany = Array.from({ length: 1_001 }, (_, i) => ({ role: "user" as const, content: `m${i}` }));
  await assert.rejects(client.append({ conversationId: "c", messages: tooMany }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError, `1,001 messages: got ${String(error)}`);
    assert.equal(error.field, "messages");
    return true;
  });
  await assert.rejects(client.get({ conversationId: "c", limit: 10_001 }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError, `limit 10,001: got ${String(error)}`);
    assert.equal(error.field, "limit");
    return true;
  });
  await assert.rejects(client.format({ conversationId: "c", provider: "no-such-provider" }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError, `unknown provider: got ${String(error)}`);
    assert.equal(error.field, "provider");
    return true;
  });
  assert.deepEqual((await client.get({ conversationId: "c" })).messages, [], "a failed append stores nothing");
  assert.equal(
    (await client.append({ conversationId: "x".repeat(256), messages: turn(1) })).messages.length,
    2,
    "256 characters is still a valid conversationId",
  );
});

test("ContextOverflow via an alias with a small known window", async (t) => {
  const { client } = await startServer(t, {
    settings: { providers: { tiny: { provider: "openai", model: "m", contextWindow: 50 } } },
  });
  const long: Message = { role: "user", content: "lorem ipsum dolor sit amet ".repeat(40) };
  await client.append({ conversationId: "big", messages: [long] });

  for (const params of [{ provider: "tiny" }, { provider: "tiny", model: "m" }]) {
    await assert.rejects(client.prepare({ conversationId: "big", ...params }), (error: unknown) => {
      assert.ok(error instanceof ContextOverflowError, `got ${String(error)}`);
      assert.equal(error.code, 1001);
      assert.equal(error.contextWindow, 50);
      assert.ok(Number.isInteger(error.estimatedTokens) && error.estimatedTokens > 50, `estimatedTokens ${error.estimatedTokens}`);
      return true;
    });
  }
  // Another model through the same alias: capacity unknown, never refused.
  const unknown = await client.prepare({ conversationId: "big", provider: "tiny", model: "other" });
  assert.equal(unknown.contextWindow, null);
  assert.equal(unknown.model, "other");
});

test("ServerNotInitialized for a request before initialize (raw connection)", async (t) => {
  const raw = spawnServer({ command: PYTHON, args: SERVER_ARGS, env: { ...process.env, CHAT_HISTORY_STORAGE: tempDir(t) } });
  t.after(() => raw.dispose());
  await within(
    assert.rejects(raw.client.get({ conversationId: "c" }), (error: unknown) => {
      assert.ok(error instanceof ServerNotInitializedError, `got ${String(error)}`);
      assert.equal(error.code, -32002);
      return true;
    }),
    15_000,
    "chatHistory/get before initialize",
  );
});

test("StorageError when the storage folder cannot be created (its parent is a regular file)", async (t) => {
  const dir = tempDir(t);
  const file = join(dir, "not-a-folder");
  writeFileSync(file, "a regular file\n");
  const storagePath = join(file, "store");

  let server;
  try {
    server = await startStdioServer({ command: PYTHON, args: SERVER_ARGS, storagePath });
  } catch (error) {
    // A server may refuse already at initialize; then that refusal must be the typed StorageError.
    assert.ok(error instanceof StorageError, `initialize failed with ${String(error)}`);
    assert.equal(typeof error.reason, "string");
    return;
  }
  t.after(() => server.shutdown(3_000));
  for (const attempt of [1, 2]) {
    await assert.rejects(server.client.append({ conversationId: "c", messages: turn(attempt) }), (error: unknown) => {
      assert.ok(error instanceof StorageError, `attempt ${attempt}: got ${String(error)}`);
      assert.equal(error.code, 1002);
      assert.equal(typeof error.reason, "string");
      assert.ok(error.reason.length > 0);
      return true;
    });
  }
  assert.equal(server.process.exitCode, null, "the server keeps running");
});
