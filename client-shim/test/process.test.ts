/** The server process's life: a dead server rejects pending requests; shutdown; bad commands. */

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ChatHistoryClient, ConnectionClosedError, type Disposable, type RpcConnection } from "../src/client";
import { GuardedConnection } from "../src/guard";
import { startStdioServer } from "../src/stdio";
import { PYTHON, SERVER_ARGS, startServer, tempDir, turn, within } from "./helpers";

test("a killed server rejects the pending request instead of hanging, and later ones at once", async (t) => {
  const server = await startServer(t);
  const { client } = server;
  await client.append({ conversationId: "c", messages: turn(1) });

  const pending = client.get({ conversationId: "c" });
  server.process.kill("SIGKILL");
  await within(
    assert.rejects(pending, (error: unknown) => {
      assert.ok(error instanceof ConnectionClosedError, `got ${String(error)}`);
      assert.equal(error.signal, "SIGKILL");
      assert.match(error.message, /killed by SIGKILL/);
      return true;
    }),
    5_000,
    "pending request after kill",
  );
  await within(assert.rejects(client.get({ conversationId: "c" }), ConnectionClosedError), 2_000, "request after death");
  assert.deepEqual(await server.exited, { code: null, signal: "SIGKILL" });
});

test("a server that exits by itself rejects the pending requests (several at once)", async (t) => {
  const server = await startServer(t);
  const requests = [1, 2, 3].map((i) => server.client.append({ conversationId: `c${i}`, messages: turn(i) }));
  server.process.kill("SIGTERM");
  const results = await within(Promise.allSettled(requests), 5_000, "pending requests after SIGTERM");
  for (const result of results) {
    // A request the server answered before it went is fine; none may hang.
    if (result.status === "rejected") assert.ok(result.reason instanceof ConnectionClosedError, String(result.reason));
  }
});

test("shutdown then exit ends the server with code 0", async (t) => {
  const server = await startServer(t);
  await server.client.append({ conversationId: "c", messages: turn(1) });
  assert.deepEqual(await within(server.shutdown(), 10_000, "shutdown"), { code: 0, signal: null });
});

test("data survives a restart on the same storage folder", async (t) => {
  const storagePath = join(tempDir(t), "store");
  const first = await startServer(t, { storagePath });
  const { messages } = await first.client.append({ conversationId: "keep", messages: turn(1) });
  await first.shutdown();
  const second = await startServer(t, { storagePath });
  assert.deepEqual((await second.client.get({ conversationId: "keep" })).messages, messages);
});

test("a command that does not exist fails startup with a clear error", async () => {
  await within(
    assert.rejects(
      startStdioServer({ command: "/nonexistent/python-for-chat-history", args: SERVER_ARGS }),
      (error: unknown) => {
        assert.ok(error instanceof ConnectionClosedError, `got ${String(error)}`);
        assert.match(error.message, /could not be started/);
        assert.match(error.message, /\/nonexistent\/python-for-chat-history/);
        return true;
      },
    ),
    10_000,
    "startup with a missing command",
  );
});

test("an interpreter without the package fails startup, quoting the server's stderr", async () => {
  await within(
    assert.rejects(startStdioServer({ command: PYTHON, args: ["-m", "chat_history_no_such_module"] }), (error: unknown) => {
      assert.ok(error instanceof ConnectionClosedError, `got ${String(error)}`);
      assert.match(error.message, /No module named chat_history_no_such_module/);
      return true;
    }),
    15_000,
    "startup with a missing module",
  );
});

test("GuardedConnection: fail() rejects pending requests; sticky failures reject later ones", async () => {
  const never: RpcConnection = {
    sendRequest: () => new Promise(() => undefined),
    onNotification: (): Disposable => ({ dispose: () => undefined }),
  };
  const guarded = new GuardedConnection(never);
  const client = new ChatHistoryClient(guarded);
  const pending = client.get({ conversationId: "c" });
  assert.equal(guarded.pendingCount, 1);
  guarded.fail(new ConnectionClosedError("gone"), false);
  await assert.rejects(pending, ConnectionClosedError);
  assert.equal(guarded.pendingCount, 0);
  const next = client.get({ conversationId: "c" });
  assert.equal(guarded.pendingCount, 1, "not sticky: a later request goes through");
  guarded.fail(new ConnectionClosedError("gone for good"), true);
  await assert.rejects(next, /gone for good/);
  await assert.rejects(client.get({ conversationId: "c" }), /gone for good/);
});
