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
import { startStdioServer, type ChatHistorySettings, type TrimmedNotification } from "chat-history-client";
import { InterruptedReply, ModelRequestError, runTurn, summarize, type TurnEvent } from "../src/chat";
import { READ_FILE_TOOL, readWorkspaceFile } from "../src/tools";
import { startFakeModelServer } from "../e2e/fake-model-server.mjs";

const REPO = resolve(__dirname, "..", "..", "..", "..");
const VENV_PYTHON = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.CHAT_HISTORY_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");

type Kind = "openai" | "anthropic" | "ollama";
const BASE_PATH: Record<Kind, string> = { openai: "/v1", anthropic: "", ollama: "" };
const CALL_ID: Record<Kind, string | RegExp> = { openai: "call_fake_1", anthropic: "toolu_fake_1", ollama: /^call_[0-9a-f]{12}$/ };

async function setup(t: TestContext, kind: Kind = "openai", settings: ChatHistorySettings = {}) {
  const root = mkdtempSync(join(tmpdir(), "chat-panel-turn-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  writeFileSync(join(root, "hello.txt"), "Hello from a workspace file.\n");
  const server = await startStdioServer({ command: PYTHON, args: ["-m", "chat_history"], storagePath: join(root, "store"), settings });
  t.after(() => server.shutdown());
  const fake = await startFakeModelServer({ chunkDelayMs: 0 });
  t.after(() => fake.close());
  const events: TurnEvent[] = [];
  const turn = (conversationId: string, prompt: string, promptStored = false) =>
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
      { promptStored },
    );
  const model = { kind, baseUrl: `${fake.url}${BASE_PATH[kind]}`, model: "fake-model", maxOutputTokens: 100 };
  return { server, fake, events, turn, model };
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
  await assert.rejects(broken, /answered 404 Not Found: no route POST \/nowhere\/chat\/completions/);
  assert.equal(fake.requests.length, 0);
  const { messages } = await server.client.get({ conversationId: "c3" });
  assert.deepEqual(messages.map((m) => m.role), ["user"]);
  // The next turn still works: the unanswered prompt is a turn of its own.
  await turn("c3", "second try");
  assert.deepEqual((await server.client.get({ conversationId: "c3" })).messages.map((m) => m.role), ["user", "user", "assistant"]);
});

test("every reply is reported with reportUsage (prepare's raw estimate, the provider's prompt tokens): the turn sees the calibration", async (t) => {
  const { fake, events, turn } = await setup(t);
  await turn("u1", "first");
  await turn("u1", "second");
  const calibrations = events.flatMap((e) => (e.type === "calibrated" ? [e.calibration] : []));
  assert.equal(calibrations.length, 2, "one report per model reply");
  assert.deepEqual(calibrations.map((c) => c.samples), [1, 2]);
  // The fake counts raw request bytes / 4, more than the server's estimate of the body alone.
  assert.ok(calibrations[1].factor > 1, JSON.stringify(calibrations));
  const prepared = events.flatMap((e) => (e.type === "prepared" ? [e.request] : []));
  assert.equal(prepared.length, 2);
  // The second prepare is calibrated by the first report: its estimate is the raw one times the factor.
  assert.ok(prepared[1].estimatedTokens > prepared[1].rawEstimatedTokens, JSON.stringify(prepared[1]));
  assert.equal(fake.requests.length, 2);
});

test("regenerate: the stored prompt is run again without being appended twice", async (t) => {
  const { server, fake, turn } = await setup(t);
  await turn("r1", "tell me a joke");
  const first = (await server.client.get({ conversationId: "r1" })).messages;
  await server.client.truncate({ conversationId: "r1", fromId: first[1].id });
  await turn("r1", "tell me a joke", true);
  const after = (await server.client.get({ conversationId: "r1" })).messages;
  assert.deepEqual(after.map((m) => [m.role, m.turn]), [["user", first[0].turn], ["assistant", first[0].turn]]);
  assert.match(after[1].content, /Reply #2 to: tell me a joke/);
  assert.equal(fake.requests.length, 2);
});

test("a compaction proposal carried out: the model's summary saved through throughId stands in for the old turns; undo brings them back", async (t) => {
  const settings = { context: { maxContextTokens: 4000, compaction: { triggerRatio: 0.05, keepRecentTurns: 1, maxSummaryTokens: 200 } } };
  const { server, fake, events, turn, model } = await setup(t, "openai", settings);
  for (const q of ["about apples", "about bananas", "about cherries"]) await turn("k1", q);
  const proposal = events.flatMap((e) => (e.type === "prepared" && e.request.compaction ? [e.request.compaction] : [])).at(-1);
  assert.ok(proposal, "prepare proposed a compaction");
  const summary = await summarize({ model, fetch }, proposal);
  assert.equal(fake.compactions, 1, "the compaction request went to the model");
  assert.match(summary, /^SUMMARY \(fake\): the person asked "about apples"/);
  await server.client.saveSummary({ conversationId: "k1", summary, coversThroughId: proposal.throughId });
  const next = await server.client.prepare({ conversationId: "k1", provider: "openai", model: "fake-model" });
  assert.ok(next.compactedTurns > 0, JSON.stringify(next));
  const sent = JSON.stringify(next.body);
  assert.match(sent, /SUMMARY \(fake\)/);
  assert.doesNotMatch(sent, /Reply #1 to: about apples/);
  assert.equal((await server.client.deleteSummary({ conversationId: "k1" })).deleted, true);
  const undone = await server.client.prepare({ conversationId: "k1", provider: "openai", model: "fake-model" });
  assert.equal(undone.compactedTurns, 0);
  assert.match(JSON.stringify(undone.body), /Reply #1 to: about apples/);
});

// --- issue 25: dropped, unfinished, failed and stopped replies ----------------------------------

test("a stream cut inside a tool call: an interrupted reply in words, nothing of it stored; the retry stores the prompt once", async (t) => {
  const { server, events, turn } = await setup(t);
  await assert.rejects(turn("cut", "Please read hello.txt [cut-tool]"), (error: unknown) => {
    assert.ok(error instanceof InterruptedReply);
    assert.equal(error.why, "cut");
    assert.equal(error.partial, "Let me look. ");
    assert.match(error.message, /connection to the model closed in the middle of the reply/);
    assert.doesNotMatch(error.message, /terminated/);
    return true;
  });
  assert.ok(events.some((e) => e.type === "interrupted"));
  assert.ok(!events.some((e) => e.type === "streamEnd"), "no half-written call reached the panel");
  assert.deepEqual((await server.client.get({ conversationId: "cut" })).messages.map((m) => m.role), ["user"]);
  await turn("cut", "Please read hello.txt [cut-tool]", true);
  const { messages } = await server.client.get({ conversationId: "cut" });
  assert.deepEqual(messages.map((m) => m.role), ["user", "assistant", "tool", "assistant"], "the prompt once, then the whole exchange");
});

test("a text reply that ends without a finish reason is interrupted, not stored as complete", async (t) => {
  const { server, turn } = await setup(t);
  await assert.rejects(turn("short", "Tell me [cut-text]"), (error: unknown) => {
    assert.ok(error instanceof InterruptedReply);
    assert.equal(error.why, "unfinished");
    assert.equal(error.partial, "This reply stops in the middle of");
    assert.match(error.message, /ended without saying it was complete/);
    return true;
  });
  assert.deepEqual((await server.client.get({ conversationId: "short" })).messages.map((m) => m.role), ["user"]);
});

test("a 500 and a proxy's 502 are told in words (never HTML); the retry then answers", async (t) => {
  const { server, turn } = await setup(t);
  await assert.rejects(turn("e", "Hello [500]"), (error: unknown) => {
    assert.ok(error instanceof ModelRequestError);
    assert.equal(error.status, 500);
    assert.match(error.message, /answered 500 Internal Server Error: The server had an error while processing your request\./);
    return true;
  });
  await assert.rejects(turn("e", "Hello [502]"), (error: unknown) => {
    assert.ok(error instanceof ModelRequestError);
    assert.match(error.message, /answered 502 Bad Gateway: a proxy or gateway between you and the model could not reach it/);
    assert.doesNotMatch(error.message, /<|nginx/);
    return true;
  });
  await turn("e", "Hello [502]", true);
  const { messages } = await server.client.get({ conversationId: "e" });
  assert.deepEqual(messages.map((m) => m.role), ["user", "user", "assistant"]);
});

test("Stop aborts a running reply: nothing of it is stored", async (t) => {
  const { server, fake, model } = await setup(t);
  const stop = new AbortController();
  const events: TurnEvent[] = [];
  const running = runTurn(
    {
      client: server.client,
      conversationId: "s",
      model,
      historyProvider: "openai",
      tools: [],
      runTool: async () => "",
      fetch,
      on: (e) => {
        events.push(e);
        if (e.type === "delta" && events.filter((x) => x.type === "delta").length === 3) stop.abort();
      },
      signal: stop.signal,
    },
    "Tell me a long story [slow]",
  );
  await assert.rejects(running, (error: unknown) => error instanceof InterruptedReply && error.why === "stopped" && /You stopped the reply/.test(error.message));
  assert.equal(fake.requests.length, 1);
  assert.deepEqual((await server.client.get({ conversationId: "s" })).messages.map((m) => m.role), ["user"]);
});

// --- Version 5: branches and provider state that stays valid -----------------------------------

function turnOptions(server: Awaited<ReturnType<typeof setup>>["server"], model: Awaited<ReturnType<typeof setup>>["model"], events: TurnEvent[], conversationId: string) {
  return {
    client: server.client,
    conversationId,
    model,
    historyProvider: model.kind,
    tools: [],
    runTool: async () => "",
    fetch,
    on: (e: TurnEvent) => events.push(e),
    storeReplies: true,
  };
}

test("Regenerate (version 5): the reply streams into a row begun after the prompt; the old reply stays a sibling and is not sent", async (t) => {
  const { server, fake, events, model } = await setup(t);
  const options = turnOptions(server, model, events, "r1");
  await runTurn(options, "Tell me about pears");
  const [prompt, first] = (await server.client.get({ conversationId: "r1" })).messages;
  const begun = await server.client.beginReply({ conversationId: "r1", parentId: prompt!.id, expectedLastId: first!.id });
  await runTurn(options, prompt!.content, { promptStored: true, begun });
  const sent = fake.requests.at(-1)!.body.messages;
  assert.deepEqual(sent.map((m) => m.role), ["user"], "the request holds the prompt, not the reply it regenerates");
  const { messages } = await server.client.get({ conversationId: "r1" });
  assert.deepEqual(messages.map((m) => m.id), [prompt!.id, begun.id], "the new reply is the begun row");
  assert.match(messages[1]!.content, /Reply #2 to: Tell me about pears/);
  assert.deepEqual(messages[1]!.siblings, { index: 1, count: 2, ids: [first!.id, begun.id] });
  assert.equal(messages[1]!.status, "complete");
});

test("Regenerate (version 5) whose request fails discards the begun row: the earlier reply is the conversation's again", async (t) => {
  const { server, events, model } = await setup(t);
  await runTurn(turnOptions(server, model, events, "r2"), "Tell me about plums");
  const [prompt, first] = (await server.client.get({ conversationId: "r2" })).messages;
  const begun = await server.client.beginReply({ conversationId: "r2", parentId: prompt!.id });
  const broken = { ...turnOptions(server, { ...model, baseUrl: `${model.baseUrl}/nowhere` }, events, "r2") };
  await assert.rejects(runTurn(broken, prompt!.content, { promptStored: true, begun }), ModelRequestError);
  const { messages } = await server.client.get({ conversationId: "r2" });
  assert.deepEqual(messages.map((m) => [m.id, m.status]), [[prompt!.id, "complete"], [first!.id, "complete"]]);
  const tree = await server.client.getTree({ conversationId: "r2" });
  assert.equal(tree.nodes.length, 2, "nothing of the discarded reply is left");
});

test("anthropic: signed thinking is stored with the reply; a refusal of its signature is reported, fenced and retried once without it", async (t) => {
  const { server, fake, events, model } = await setup(t, "anthropic");
  const options = turnOptions(server, model, events, "s1");
  await runTurn(options, "Think first [think]");
  const reply = (await server.client.get({ conversationId: "s1" })).messages.at(-1)!;
  const thinking = (reply.providerData.anthropic as { thinking: { type: string; signature: string }[] }).thinking;
  assert.deepEqual(thinking.map((b) => [b.type, b.signature.startsWith("EqQBCkYIARgCKkBfake")]), [["thinking", true]]);
  assert.match(reply.content, /Reply #1 to: Think first \[think\]/);

  const before = fake.requests.length;
  await runTurn(options, "And now? [refuse-signature]");
  const [refused, retried] = fake.requests.slice(before).map((r) => JSON.stringify(r.body.messages));
  assert.equal(fake.requests.length, before + 2, "one refused request, one retry");
  assert.equal(fake.refusals, 1);
  assert.match(refused!, /"type":"thinking"/, "the refused request sent the thinking block back");
  assert.doesNotMatch(retried!, /"type":"thinking"/, "the retry sends it no more");
  const retry = events.find((e) => e.type === "retry");
  assert.ok(retry?.type === "retry" && retry.kind === "providerState" && /Invalid `signature` in `thinking` block/.test(retry.reason), JSON.stringify(retry));
  assert.match((await server.client.get({ conversationId: "s1" })).messages.at(-1)!.content, /to: And now\? \[refuse-signature\]/);
});
