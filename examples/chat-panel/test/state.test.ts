import assert from "node:assert/strict";
import { test } from "node:test";
import type { StoredMessage, TrimmedNotification } from "chat-history-client";
import * as S from "../src/state";

let nextId = 1;
function row(role: StoredMessage["role"], content: string, extra: Partial<StoredMessage> = {}): StoredMessage {
  return {
    id: extra.id ?? nextId++,
    turn: 1,
    tokens: 3,
    role,
    content,
    toolCalls: [],
    toolCallId: null,
    name: null,
    attachments: [],
    timestamp: 1764480000000,
    providerData: {},
    metadata: {},
    ...extra,
  };
}

function trim(extra: Partial<TrimmedNotification>): TrimmedNotification {
  return {
    workspace: "w",
    conversationId: "c1",
    scope: "request",
    reason: "turnLimit",
    droppedMessages: 4,
    droppedTurns: 2,
    retainedTurns: 1,
    tokensBefore: 100,
    tokensAfter: 40,
    budget: null,
    ...extra,
  } as TrimmedNotification;
}

test("newest page first, older pages in front, nothing shown twice", () => {
  let s = S.emptyState("c1");
  s = S.pageLoaded(s, { messages: [row("user", "q3", { id: 30 }), row("assistant", "a3", { id: 31 })], hasMore: true }, false);
  assert.equal(S.oldestId(s), 30);
  assert.ok(S.shouldLoadOlder(s));
  s = S.olderRequested(s);
  assert.ok(!S.shouldLoadOlder(s), "no second request while one is pending");
  s = S.pageLoaded(
    s,
    { messages: [row("user", "q2", { id: 20 }), row("assistant", "a2", { id: 21 }), row("user", "q3", { id: 30 })], hasMore: false },
    true,
  );
  assert.deepEqual(s.messages.map((m) => m.id), [20, 21, 30, 31]);
  assert.ok(!S.shouldLoadOlder(s), "no more pages");
  assert.equal(s.loadingOlder, false);
});

test("a turn: optimistic prompt, streamed reply, stored rows replace the unsaved ones", () => {
  let s = S.emptyState("c1");
  s = S.promptSent(s, "hello");
  assert.equal(s.busy, true);
  assert.deepEqual(S.viewOf(s).messages.map((m) => [m.role, m.id, m.actions]), [["user", null, []]]);
  s = S.rowsStored(s, [row("user", "hello", { id: 5 })]);
  s = S.streamStarted(s);
  s = S.streamDelta(s, "Hi ");
  s = S.streamDelta(s, "there");
  const streaming = S.viewOf(s).messages[1];
  assert.equal(streaming.content, "Hi there");
  assert.equal(streaming.streaming, true);
  s = S.streamEnded(s);
  s = S.rowsStored(s, [row("assistant", "Hi there", { id: 6 })]);
  s = S.turnFinished(s);
  assert.equal(s.busy, false);
  assert.deepEqual(s.messages.map((m) => [m.key, m.content, m.streaming]), [
    ["id:5", "hello", false],
    ["id:6", "Hi there", false],
  ]);
  assert.deepEqual(S.viewOf(s).messages[1].actions, ["copy"]);
});

test("a discarded stream (error or retry) leaves no partial reply", () => {
  let s = S.promptSent(S.emptyState("c1"), "q");
  s = S.streamDelta(S.streamStarted(s), "part");
  s = S.streamDiscarded(s);
  assert.deepEqual(s.messages.map((m) => m.role), ["user"]);
});

test("tool rows fold into the call they answer, collapsed with arguments and result", () => {
  let s = S.emptyState("c1");
  const call = { id: "call_1", name: "read_file", arguments: '{"path":"a.txt"}' };
  s = S.pageLoaded(
    s,
    {
      messages: [
        row("user", "read a.txt"),
        row("assistant", "", { toolCalls: [call] }),
        row("tool", "contents of a", { toolCallId: "call_1", name: "read_file" }),
        row("assistant", "It says: contents of a"),
      ],
      hasMore: false,
    },
    false,
  );
  const view = S.viewOf(s);
  assert.deepEqual(
    view.messages.map((m) => [m.role, m.actions]),
    [
      ["user", ["copy"]],
      ["assistant", []],
      ["assistant", ["copy"]],
    ],
    "the tool row is folded in; nothing to copy on a bare tool-call carrier",
  );
  assert.deepEqual(view.messages[1].toolCalls, [{ id: "call_1", name: "read_file", arguments: '{\n  "path": "a.txt"\n}', result: "contents of a" }]);
});

test("a tool row whose call is on an unloaded page is shown on its own", () => {
  const s = S.pageLoaded(S.emptyState("c1"), { messages: [row("tool", "orphan", { toolCallId: "call_9", name: "read_file" })], hasMore: true }, false);
  assert.deepEqual(S.viewOf(s).messages.map((m) => [m.role, m.content]), [["tool", "read_file result:\norphan"]]);
});

test("trim notices say what happened, in words, for this conversation only", () => {
  let s = S.emptyState("c1");
  s = S.trimmed(s, trim({ scope: "request", reason: "turnLimit", droppedMessages: 4 }));
  s = S.trimmed(s, trim({ scope: "request", reason: "tokenBudget", droppedMessages: 1, budget: 32000 }));
  s = S.trimmed(s, trim({ scope: "storage", reason: "count", droppedMessages: 2 }));
  s = S.trimmed(s, trim({ conversationId: "other", scope: "storage", reason: "age" }));
  assert.deepEqual(
    s.notices.map((n) => [n.kind, n.text]),
    [
      ["request", "4 earlier messages not sent by the turn limit; they stay in the history."],
      ["request", "1 earlier message not sent to fit the 32,000-token budget; they stay in the history."],
      ["storage", "2 messages deleted by your retention settings (message limit)."],
    ],
  );
  s = S.dismissNotice(s, s.notices[0].id);
  assert.equal(s.notices.length, 2);
  for (let i = 0; i < 10; i++) s = S.addNotice(s, "info", `n${i}`);
  assert.equal(s.notices.length, S.MAX_NOTICES, "old notices make room");
  assert.equal(s.notices.at(-1)!.text, "n9");
});

test("the meter: estimate against the budget, else the window, else alone", () => {
  let s = S.prepared(S.emptyState("c1"), { estimatedTokens: 1830, budget: 32000, contextWindow: 200000 });
  assert.deepEqual(S.viewOf(s).meter, { label: "1,830 / 32,000 tokens", fraction: 1830 / 32000, detail: "window 200,000" });
  s = S.usageReported(s, 1900);
  assert.equal(S.viewOf(s).meter!.detail, "window 200,000 · provider counted 1,900");
  s = S.prepared(s, { estimatedTokens: 50, budget: null, contextWindow: 100 });
  assert.equal(S.viewOf(s).meter!.fraction, 0.5);
  s = S.prepared(s, { estimatedTokens: 50, budget: null, contextWindow: null });
  assert.deepEqual(S.viewOf(s).meter, { label: "50 tokens", fraction: null, detail: "" });
  assert.equal(S.viewOf(S.emptyState("c")).meter, null);
});

test("message actions: only on stored rows, only those the server supports", () => {
  const s = S.pageLoaded(S.emptyState("c1"), { messages: [row("user", "q"), row("system", "sys")], hasMore: false }, false);
  const actions = [
    { id: "copy", label: "Copy", roles: ["user" as const], since: 1 },
    { id: "fork", label: "Fork", roles: ["user" as const], since: 2 },
  ];
  assert.deepEqual(S.actionsFor(s.messages[0], 1, actions), ["copy"]);
  assert.deepEqual(S.actionsFor(s.messages[0], 2, actions), ["copy", "fork"]);
  assert.deepEqual(S.actionsFor(s.messages[1], 2, actions), []);
});

test("titles from the first prompt", () => {
  assert.equal(S.titleFromPrompt("  What   does\nmain.py do? "), "What does main.py do?");
  assert.equal(S.titleFromPrompt(" \n "), "New chat");
  const long = S.titleFromPrompt("x".repeat(100));
  assert.equal([...long].length, 60);
  assert.ok(long.endsWith("…"));
});
