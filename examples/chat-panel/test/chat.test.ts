/**
 * One chat turn (src/chat.ts) against the real history server (`python -m chat_history` over
 * stdio, through the shim's startStdioServer) and the e2e's fake model server (a test double
 * speaking OpenAI's streaming wire format), without VS Code.
 */

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test, type TestContext } from "node:test";
import { startStdioServer, type TrimmedNotification } from "chat-history-client";
import { runTurn, type TurnEvent } from "../src/chat";
import { READ_FILE_TOOL, readWorkspaceFile } from "../src/tools";
import { startFakeModelServer } from "../e2e/fake-model-server.mjs";

const REPO = resolve(__dirname, "..", "..", "..", "..");
const VENV_PYTHON = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.CHAT_HISTORY_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");

type Kind = "openai" | "anthropic" | "ollama";
const BASE_PATH: Record<Kind, string> = { openai: "/v1", anthropic: "", ollama: "" };
const CALL_ID: Record<Kind, string | RegExp> = { openai: "call_fake_1", anthropic: "toolu_fake_1", ollama: /^call_[0-9a-f]{12}$/ };

async function setup(t: TestContext, kind: Kind = "openai") {
  const root = mkdtempSync(join(tmpdir(), "chat-panel-turn-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  writeFileSync(join(root, "hello.txt"), "Hello from a workspace file.\n");
  const server = await startStdioServer({ command: PYTHON, args: ["-m", "chat_history"], storagePath: join(root, "store"), settings: {} });
  t.after(() => server.shutdown());
  const fake = await startFakeModelServer({ chunkDelayMs: 0 });
  t.after(() => fake.close());
  const events: TurnEvent[] = [];
  const turn = (conversationId: string, prompt: string) =>
    runTurn(
      {
        client: server.client,
        conversationId,
        model: { kind, baseUrl: `${fake.url}${BASE_PATH[kind]}`, model: "fake-model", maxOutputTokens: 100 },
        historyProvider: kind,
        tools: [READ_FILE_TOOL],
        runTool: (call) => readWorkspaceFile([root], call.arguments),
        fetch,
        on: (e) => events.push(e),
      },
      prompt,
    );
  return { server, fake, events, turn };
}

for (const kind of ["openai", "anthropic", "ollama"] as const) {
  test(`${kind}: a turn with a tool call — prompt, call, result and reply recorded in order and paired`, async (t) => {
    const { server, fake, events, turn } = await setup(t, kind);
    await turn("c1", "Please read hello.txt");
    const { messages } = await server.client.get({ conversationId: "c1" });
    // Ollama's native API names no call id: the turn made a unique one, used for call and result.
    const want = CALL_ID[kind];
    const id = messages[1].toolCalls[0]?.id ?? "";
    if (typeof want === "string") assert.equal(id, want);
    else assert.match(id, want);
    assert.deepEqual(
      messages.map((m) => [m.role, m.content, m.toolCalls.map((c) => [c.id, c.name, c.arguments]), m.toolCallId]),
      [
        ["user", "Please read hello.txt", [], null],
        ["assistant", "", [[id, "read_file", { path: "hello.txt" }]], null],
        ["tool", "Hello from a workspace file.\n", [], id],
        ["assistant", "The file says: **Hello from a workspace file.**", [], null],
      ],
    );
    assert.equal(new Set(messages.map((m) => m.turn)).size, 1, "one turn");
    assert.equal(fake.requests.length, 2);
    // The server's body for the provider carried the result back, in that provider's shape.
    const last = fake.requests[1].body.messages.at(-1) as { role: string; content: unknown; tool_call_id?: string };
    if (kind === "openai") assert.deepEqual([last.role, last.tool_call_id], ["tool", id]);
    if (kind === "ollama") assert.deepEqual([last.role, last.content], ["tool", "Hello from a workspace file.\n"]);
    if (kind === "anthropic") {
      assert.equal(last.role, "user");
      const block = (last.content as { type: string; tool_use_id?: string }[]).find((b) => b.type === "tool_result");
      assert.equal(block?.tool_use_id, id);
    }
    assert.ok(events.some((e) => e.type === "delta"), "the reply streamed");
    assert.equal(events.filter((e) => e.type === "prepared").length, 2, "one prepare per model request");
    assert.ok(events.some((e) => e.type === "usage" && e.promptTokens > 0));
  });
}

for (const kind of ["openai", "anthropic"] as const) {
  test(`${kind}: a context-length error — one retry with overflowRecovery that sends less, and its trim notification`, async (t) => {
    const { server, fake, events, turn } = await setup(t, kind);
    const trims: TrimmedNotification[] = [];
    server.client.onTrimmed((e) => trims.push(e));
    for (let i = 1; i <= 4; i++) await turn("c2", `question ${i} ${"words ".repeat(40)}`);
    const before = fake.requests.length;
    await turn("c2", "the long one [overflow]");
    assert.equal(fake.requests.length, before + 2);
    const [refused, retried] = fake.requests.slice(before).map((r) => r.body.messages);
    assert.ok(retried.length < refused.length, `${retried.length} < ${refused.length}`);
    assert.ok(events.some((e) => e.type === "retry"));
    assert.ok(trims.some((e) => e.scope === "request" && e.reason === "overflowRecovery" && e.droppedMessages > 0), JSON.stringify(trims));
    const { messages } = await server.client.get({ conversationId: "c2" });
    assert.equal(messages.length, 10, "all five turns stay stored: the trim was of the request only");
    assert.match(messages.at(-1)!.content, /Reply #5 to: the long one \[overflow\]/);
  });
}

test("a model error that is not about context length is not retried, and the prompt stays recorded", async (t) => {
  const { server, fake, turn } = await setup(t);
  const broken = runTurn(
    {
      client: server.client,
      conversationId: "c3",
      model: { kind: "openai", baseUrl: `${fake.url}/nowhere`, model: "fake-model", maxOutputTokens: 100 },
      historyProvider: "openai",
      tools: [],
      runTool: async () => "",
      fetch,
      on: () => undefined,
    },
    "hello?",
  );
  await assert.rejects(broken, /answered 404: no route POST \/nowhere\/chat\/completions/);
  assert.equal(fake.requests.length, 0);
  const { messages } = await server.client.get({ conversationId: "c3" });
  assert.deepEqual(messages.map((m) => m.role), ["user"]);
  // The next turn still works: the unanswered prompt is a turn of its own.
  await turn("c3", "second try");
  assert.deepEqual((await server.client.get({ conversationId: "c3" })).messages.map((m) => m.role), ["user", "user", "assistant"]);
});
