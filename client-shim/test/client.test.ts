/** ChatHistoryClient without a server: error mapping by code and the onTrimmed fan-out. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { ResponseError } from "vscode-jsonrpc/node";
import {
  ChatHistoryClient,
  ChatHistoryError,
  ConnectionClosedError,
  ContextOverflowError,
  InvalidParamsError,
  ServerNotInitializedError,
  StorageError,
  toChatHistoryError,
  type RpcConnection,
} from "../src/client";
import type { TrimmedNotification } from "../src/types";

/** A connection double: records requests, answers with `reply`, keeps one handler per method like vscode-jsonrpc. */
function fakeConnection(reply: (method: string, params: unknown) => Promise<unknown>) {
  const handlers = new Map<string, (params: any) => void>();
  const sent: { method: string; params: unknown }[] = [];
  const connection: RpcConnection = {
    sendRequest: <R>(method: string, params?: unknown) => {
      sent.push({ method, params });
      return reply(method, params) as Promise<R>;
    },
    onNotification: (method, handler) => {
      handlers.set(method, handler);
      return { dispose: () => handlers.get(method) === handler && handlers.delete(method) };
    },
  };
  return { connection, handlers, sent };
}

test("each method sends its wire method name with the params as given", async () => {
  const { connection, sent } = fakeConnection(async () => ({}));
  const client = new ChatHistoryClient(connection);
  const key = { conversationId: "c", workspace: "w" };
  await client.append({ ...key, messages: [{ role: "user", content: "hi" }] });
  await client.get({ ...key, limit: 5 });
  await client.format({ ...key, provider: "gemini" });
  await client.prepare({ ...key, overflowRecovery: true });
  await client.saveSummary({ ...key, summary: "s" });
  await client.getSummary(key);
  await client.clear(key);
  await client.listConversations();
  assert.deepEqual(
    sent.map((s) => s.method),
    [
      "chatHistory/append",
      "chatHistory/get",
      "chatHistory/format",
      "chatHistory/prepare",
      "chatHistory/saveSummary",
      "chatHistory/getSummary",
      "chatHistory/clear",
      "chatHistory/listConversations",
    ],
  );
  assert.deepEqual(sent[1]!.params, { ...key, limit: 5 });
  assert.deepEqual(sent.at(-1)!.params, {}, "listConversations sends an object even without params");
});

test("ResponseErrors map to typed errors by code", async () => {
  const cases: [ResponseError<unknown>, new (...args: any[]) => ChatHistoryError, (e: any) => void][] = [
    [new ResponseError(-32602, "conversationId: must not be empty", { field: "conversationId" }), InvalidParamsError, (e) => assert.equal(e.field, "conversationId")],
    [new ResponseError(-32002, "not initialized"), ServerNotInitializedError, () => undefined],
    [
      new ResponseError(1001, "too big", { estimatedTokens: 120, contextWindow: 50 }),
      ContextOverflowError,
      (e) => {
        assert.equal(e.estimatedTokens, 120);
        assert.equal(e.contextWindow, 50);
      },
    ],
    [new ResponseError(1002, "storage error: disk full", { reason: "disk full" }), StorageError, (e) => assert.equal(e.reason, "disk full")],
    [new ResponseError(-32097, "Pending response rejected since connection got disposed"), ConnectionClosedError, () => undefined],
    [new ResponseError(-32096, "Client is not running"), ConnectionClosedError, () => undefined],
    [new ResponseError(-32099, "Cannot call write after a stream was destroyed"), ConnectionClosedError, () => undefined],
    [new ResponseError(-32601, "Method Not Found: chatHistory/x"), ChatHistoryError, (e) => assert.equal(e.constructor, ChatHistoryError)],
  ];
  for (const [response, cls, check] of cases) {
    const { connection } = fakeConnection(() => Promise.reject(response));
    const client = new ChatHistoryClient(connection);
    await assert.rejects(client.get({ conversationId: "c" }), (error: any) => {
      assert.ok(error instanceof cls, `${response.code} -> ${error?.constructor?.name}`);
      assert.equal(error.code, response.code);
      assert.equal(error.message, response.message);
      assert.equal(error.method, "chatHistory/get");
      assert.equal(error.cause, response);
      assert.deepEqual(error.data, response.data);
      check(error);
      return true;
    });
  }
  const plain = new TypeError("not from the server");
  assert.equal(toChatHistoryError(plain), plain, "errors without a code pass through");
});

test("onTrimmed fans one registration out to every listener and unregisters after the last", () => {
  const { connection, handlers } = fakeConnection(async () => ({}));
  const client = new ChatHistoryClient(connection);
  const a: TrimmedNotification[] = [];
  const b: TrimmedNotification[] = [];
  const subA = client.onTrimmed((event) => a.push(event));
  const subB = client.onTrimmed((event) => {
    b.push(event);
    throw new Error("a failing listener does not starve the others");
  });
  const subC = client.onTrimmed(() => undefined);
  const event: TrimmedNotification = {
    workspace: "w",
    conversationId: "c",
    scope: "storage",
    reason: "count",
    droppedMessages: 2,
    droppedTurns: 1,
    retainedTurns: 1,
    tokensBefore: 26,
    tokensAfter: 13,
    budget: null,
  };
  handlers.get("chatHistory/trimmed")!(event);
  assert.deepEqual(a, [event]);
  assert.deepEqual(b, [event]);
  subA.dispose();
  subB.dispose();
  assert.ok(handlers.has("chatHistory/trimmed"));
  subC.dispose();
  assert.ok(!handlers.has("chatHistory/trimmed"), "no listener left: unregistered");
});

test("the core entry point loads neither vscode nor vscode-languageclient", () => {
  const { spawnSync } = require("node:child_process") as typeof import("node:child_process");
  const entry = require.resolve("../src/index");
  const probe = `
    const Module = require("node:module");
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (request, ...rest) {
      if (request === "vscode" || request.startsWith("vscode-languageclient")) throw new Error("imported " + request);
      return resolve.call(this, request, ...rest);
    };
    const api = require(${JSON.stringify(entry)});
    if (typeof api.ChatHistoryClient !== "function" || typeof api.startStdioServer !== "function") process.exit(3);
  `;
  const result = spawnSync(process.execPath, ["-e", probe], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
});
