import assert from "node:assert/strict";
import { test } from "node:test";
import type { StoredMessage, TrimmedNotification } from "chat-history-client";
import { newestStoredId, SeenRows } from "../src/rows";
import * as E from "../src/edits";
import * as S from "../src/state";
import * as T from "../src/stream";
import * as V from "../src/view";

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
    status: "complete",
    origin: null,
    parentId: null,
    siblings: { index: 0, count: 1, ids: [extra.id ?? nextId - 1] },
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
  s = T.promptSent(s, "hello");
  assert.equal(s.busy, true);
  assert.deepEqual(V.viewOf(s).messages.map((m) => [m.role, m.id, m.actions]), [["user", null, []]]);
  s = T.rowsStored(s, [row("user", "hello", { id: 5 })]);
  s = T.streamStarted(s);
  s = T.streamDelta(s, "Hi ");
  s = T.streamDelta(s, "there");
  const streaming = V.viewOf(s).messages[1];
  assert.equal(streaming.content, "Hi there");
  assert.equal(streaming.streaming, true);
  s = T.streamEnded(s);
  s = T.rowsStored(s, [row("assistant", "Hi there", { id: 6 })]);
  s = T.turnFinished(s);
  assert.equal(s.busy, false);
  assert.deepEqual(s.messages.map((m) => [m.key, m.content, m.streaming]), [
    ["id:5", "hello", false],
    ["id:6", "Hi there", false],
  ]);
  assert.deepEqual(V.viewOf(s).messages[1].actions, ["copy"]);
});

test("a discarded stream (error or retry) leaves no partial reply", () => {
  let s = T.promptSent(S.emptyState("c1"), "q");
  s = T.streamDelta(T.streamStarted(s), "part");
  s = T.streamDiscarded(s);
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
  const view = V.viewOf(s);
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
  assert.deepEqual(V.viewOf(s).messages.map((m) => [m.role, m.content]), [["tool", "read_file result:\norphan"]]);
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

test("a request trim restates the last one of its reason instead of stacking another banner", () => {
  let s = S.emptyState("c1");
  for (const dropped of [2, 4, 6, 8]) s = S.trimmed(s, trim({ scope: "request", reason: "turnLimit", droppedMessages: dropped }));
  s = S.trimmed(s, trim({ scope: "request", reason: "tokenBudget", droppedMessages: 1, budget: 32000 }));
  s = S.trimmed(s, trim({ scope: "storage", reason: "count", droppedMessages: 2 }));
  s = S.trimmed(s, trim({ scope: "storage", reason: "count", droppedMessages: 4 }));
  assert.deepEqual(
    s.notices.map((n) => n.text),
    [
      "8 earlier messages not sent by the turn limit; they stay in the history.",
      "1 earlier message not sent to fit the 32,000-token budget; they stay in the history.",
      "2 messages deleted by your retention settings (message limit).",
      "4 messages deleted by your retention settings (message limit).",
    ],
  );
});

test("the meter: estimate against the budget, else the window, else alone", () => {
  let s = S.prepared(S.emptyState("c1"), { estimatedTokens: 1830, budget: 32000, contextWindow: 200000 });
  assert.deepEqual(V.viewOf(s).meter, { label: "1,830 / 32,000 tokens", fraction: 1830 / 32000, detail: "window 200,000" });
  s = S.usageReported(s, 1900);
  assert.equal(V.viewOf(s).meter!.detail, "window 200,000 · provider counted 1,900");
  s = S.usageReported(s, 1900, 1536);
  assert.equal(V.viewOf(s).meter!.detail, "window 200,000 · provider counted 1,900 (1,536 cached)");
  s = S.prepared(s, { estimatedTokens: 50, budget: null, contextWindow: 100 });
  assert.equal(V.viewOf(s).meter!.fraction, 0.5);
  s = S.prepared(s, { estimatedTokens: 50, budget: null, contextWindow: null });
  assert.deepEqual(V.viewOf(s).meter, { label: "50 tokens", fraction: null, detail: "" });
  assert.equal(V.viewOf(S.emptyState("c")).meter, null);
});

test("message actions: only on stored rows, only those the server supports", () => {
  const s = S.pageLoaded(S.emptyState("c1"), { messages: [row("user", "q"), row("system", "sys")], hasMore: false }, false);
  const actions = [
    { id: "copy", label: "Copy", roles: ["user" as const], since: 1 },
    { id: "fork", label: "Fork", roles: ["user" as const], since: 2 },
  ];
  assert.deepEqual(V.actionsFor(s.messages[0], 1, actions), ["copy"]);
  assert.deepEqual(V.actionsFor(s.messages[0], 2, actions), ["copy", "fork"]);
  assert.deepEqual(V.actionsFor(s.messages[1], 2, actions), []);
});

test("titles come from the server: its title, else New chat", () => {
  assert.equal(S.titleOf({ title: "What does main.py do?" }), "What does main.py do?");
  assert.equal(S.titleOf({ title: null }), "New chat");
  assert.equal(S.titleOf(undefined), "New chat");
});

// ---------------------------------------------------------------------------------------------
// Version 2: edits, search, compaction, export

function loaded(rows: StoredMessage[]): S.PanelState {
  return S.pageLoaded(S.emptyState("c1"), { messages: rows, hasMore: false }, false);
}

test("edit and resend truncates from the user row and sends the new text; regenerate truncates after the prompt and keeps it", () => {
  const rows = [
    row("user", "q1", { id: 10, turn: 1 }),
    row("assistant", "a1", { id: 11, turn: 1 }),
    row("user", "q2", { id: 12, turn: 2 }),
    row("assistant", "", { id: 13, turn: 2, toolCalls: [{ id: "t", name: "read_file", arguments: {} }] }),
    row("tool", "file", { id: 14, turn: 2, toolCallId: "t" }),
    row("assistant", "a2", { id: 15, turn: 2 }),
  ];
  const state = loaded(rows);
  assert.deepEqual(E.rewindFor(state, 12, "edit", "q2 better"), { fromId: 12, prompt: "q2 better", promptStored: false });
  assert.equal(E.rewindFor(state, 11, "edit", "x"), null, "only a user row is edited and resent");
  // Regenerating the final reply of a turn with tool rounds reruns the whole turn: from the first row after its prompt.
  assert.deepEqual(E.rewindFor(state, 15, "regenerate"), { fromId: 13, prompt: "q2", promptStored: true });
  assert.deepEqual(E.rewindFor(state, 11, "regenerate"), { fromId: 11, prompt: "q1", promptStored: true });
  // The turn's prompt is on an older page: no rewind (the panel cannot know what to resend).
  assert.equal(E.rewindFor(loaded(rows.slice(3)), 15, "regenerate"), null);
  assert.equal(E.rewindFor(state, 99, "regenerate"), null);
  assert.deepEqual(E.truncated(state, 13).messages.map((m) => m.id), [10, 11, 12]);
  assert.deepEqual(E.turnsDeleted(state, [1]).messages.map((m) => m.id), [12, 13, 14, 15]);
});

test("the version-2 actions show only on a version-2 server, on stored rows of their roles", () => {
  const state = loaded([row("user", "q", { id: 1 }), row("assistant", "a", { id: 2 }), row("tool", "r", { id: 3, toolCallId: "x" })]);
  const [user, assistant, tool] = state.messages;
  assert.deepEqual(V.actionsFor(user, 1), ["copy"]);
  assert.deepEqual(V.actionsFor(user, 2), ["copy", "edit", "fork", "redact", "deleteExchange"]);
  assert.deepEqual(V.actionsFor(assistant, 2), ["copy", "regenerate", "fork", "redact", "deleteExchange"]);
  assert.deepEqual(V.actionsFor(tool, 2), ["redact"]);
  assert.deepEqual(V.actionsFor(T.promptSent(state, "x").messages.at(-1)!, 2), [], "not before it is stored");
});

test("redact replaces every occurrence of the secret, or the whole content; nothing to change is null", () => {
  assert.equal(E.redact("key sk-123 and sk-123 again", "sk-123"), "key [redacted] and [redacted] again");
  assert.equal(E.redact("all of it", ""), "[redacted]");
  assert.equal(E.redact("[redacted]", ""), null);
  assert.equal(E.redact("nothing here", "sk-1"), null);
  const edited = E.rowEdited(loaded([row("user", "my sk-1", { id: 5 })]), row("user", "my [redacted]", { id: 5 }));
  assert.equal(edited.messages[0].content, "my [redacted]");
});

test("search snippets are cut at the highlights, given as code points, right for astral characters", () => {
  // "😀" is one code point and two UTF-16 units: a naive slice would cut the hit in half.
  const snippet = "😀😀 the apple and the Äpfel";
  const parts = S.snippetParts(snippet, [
    [7, 12],
    [21, 26],
  ]);
  assert.deepEqual(parts, [
    { text: "😀😀 the ", hit: false },
    { text: "apple", hit: true },
    { text: " and the ", hit: false },
    { text: "Äpfel", hit: true },
  ]);
  assert.deepEqual(S.snippetParts("abc", []), [{ text: "abc", hit: false }]);
  assert.deepEqual(S.snippetParts("abcdef", [[1, 3], [2, 4]]), [
    { text: "a", hit: false },
    { text: "bc", hit: true },
    { text: "d", hit: true },
    { text: "ef", hit: false },
  ], "overlapping spans are not drawn twice");
  const state = S.searchShown(
    S.emptyState("c1"),
    "apple",
    { results: [{ workspace: "w", conversationId: "c9", id: 4, turn: 1, role: "user", timestamp: 0, snippet: "an apple", highlights: [[3, 8]], onActivePath: true }], hasMore: true },
    new Map([["c9", "Fruit talk"]]),
  );
  assert.deepEqual(V.viewOf(state).search, {
    query: "apple",
    hasMore: true,
    hits: [{ conversationId: "c9", id: 4, role: "user", title: "Fruit talk", parts: [{ text: "an ", hit: false }, { text: "apple", hit: true }] }],
  });
  assert.equal(S.searchClosed(state).search, null);
  assert.equal(S.isLoaded(loaded([row("user", "q", { id: 4 })]), 4), true);
});

test("compaction: the banner while summarizing, after saving (with the turns covered), and gone after undo; the meter shows the calibration", () => {
  let state = S.compacting(S.emptyState("c1"), true);
  assert.equal(V.viewOf(state).compacting, true);
  assert.equal(V.viewOf(state).summary, null);
  state = S.summaryShown(state, { coversThroughId: 40, turns: 3 });
  assert.equal(V.viewOf(state).compacting, false);
  assert.match(V.viewOf(state).summary!, /^3 earlier turns summarized/);
  state = S.prepared(state, { estimatedTokens: 1200, budget: 32000, contextWindow: null, calibration: { factor: 1.25, samples: 4 }, compactedTurns: 5 });
  assert.match(V.viewOf(state).summary!, /^5 earlier turns summarized/);
  assert.match(V.viewOf(state).meter!.detail, /calibrated ×1\.25 \(4 samples\)/);
  assert.equal(V.viewOf(state).meter!.label, "1,200 / 32,000 tokens");
  state = S.calibrated(state, { factor: 1.5, samples: 5 });
  assert.match(V.viewOf(state).meter!.detail, /×1\.50 \(5 samples\)/);
  assert.equal(V.viewOf(S.summaryShown(state, null)).summary, null);
  assert.match(V.summaryText({ coversThroughId: 1, turns: null })!, /^Earlier turns summarized/);
});

test("export as Markdown: roles as headings, tool calls and results fenced (a fence longer than any backticks inside)", () => {
  const md = V.toMarkdown("Fruit", [
    row("user", "What is in `a.txt`?"),
    row("assistant", "", { toolCalls: [{ id: "t", name: "read_file", arguments: { path: "a.txt" } }] }),
    row("tool", "has ``` inside", { name: "read_file", toolCallId: "t" }),
    row("assistant", "It has **three** backticks."),
  ]);
  assert.equal(
    md,
    [
      "# Fruit",
      "",
      "## You",
      "",
      "What is in `a.txt`?",
      "",
      "## Assistant",
      "",
      "Tool call `read_file`:",
      "",
      "```",
      '{\n  "path": "a.txt"\n}',
      "```",
      "",
      "## Tool result (read_file)",
      "",
      "````\nhas ``` inside\n````",
      "",
      "## Assistant",
      "",
      "It has **three** backticks.",
      "",
    ].join("\n"),
  );
});

// --- issue 25: interrupted replies, failed turns, other windows --------------------------------

test("an interrupted reply keeps its text, marked, with no call shown as running; it is never the stored reply", () => {
  let state = T.promptSent(S.emptyState("c1"), "read it");
  const prompt = row("user", "read it");
  state = T.rowsStored(state, [prompt]);
  state = T.streamStarted(state);
  state = T.streamDelta(state, "Let me look. ");
  state = T.streamInterrupted(state, "Let me look. ");
  const [, bubble] = V.viewOf(state, 2).messages;
  assert.equal(bubble.interrupted, true);
  assert.deepEqual(bubble.toolCalls, []);
  assert.deepEqual(bubble.actions, [], "no actions on a row that is not stored");
  state = T.turnFailed(state, "read it", "The connection to the model closed in the middle of the reply.");
  assert.equal(state.busy, false);
  assert.deepEqual(state.retry, { prompt: "read it", promptId: prompt.id, partial: "Let me look. " });
  assert.deepEqual(state.notices.map((n) => [n.key, n.actions]), [["turn", ["retry", "keep"]]]);
  assert.equal(V.viewOf(state).messages[0].failed, true, "the prompt is marked failed");
  // The next stored assistant row is added at the end; the interrupted bubble is not reused.
  const reply = row("assistant", "Reply");
  state = T.rowsStored(T.retryStarted(state), [reply]);
  assert.deepEqual(state.messages.map((m) => [m.id, m.content]), [[prompt.id, "read it"], [reply.id, "Reply"]]);
  state = T.turnSucceeded(state);
  assert.deepEqual(state.notices, [], "the failure's notice clears once the retry succeeded");
  assert.equal(state.retry, null);
});

test("a failed turn with nothing streamed offers Retry only; the same prompt typed again is a retry", () => {
  let state = T.rowsStored(T.promptSent(S.emptyState("c1"), "hello"), [row("user", "hello")]);
  state = T.turnFailed(T.streamDiscarded(state), "hello", "The model server answered 500.");
  assert.deepEqual(state.notices[0].actions, ["retry"]);
  assert.ok(T.isRetryOf(state, "hello"));
  assert.ok(!T.isRetryOf(state, "something else"));
  // Failing again replaces the notice: errors do not pile up.
  state = T.turnFailed(T.retryStarted(state), "hello", "The model server answered 500.");
  assert.equal(state.notices.length, 1);
});

test("Keep stores the partial reply in the bubble's place and clears the offer", () => {
  let state = T.rowsStored(T.promptSent(S.emptyState("c1"), "q"), [row("user", "q")]);
  state = T.streamInterrupted(T.streamDelta(T.streamStarted(state), "half"), "half");
  state = T.turnFailed(state, "q", "cut");
  const kept = row("assistant", "half");
  state = T.partialKept(state, [kept]);
  assert.deepEqual(state.messages.map((m) => [m.id, m.interrupted ?? false]), [[state.messages[0].id, false], [kept.id, false]]);
  assert.deepEqual(state.notices, []);
});

test("a prompt never stored (the append failed) is not left looking sent", () => {
  let state = T.promptSent(S.emptyState("c1"), "lost");
  state = T.turnFailed(state, "lost", "The chat history server refused the turn");
  assert.equal(state.retry?.promptId, null);
  assert.deepEqual(state.messages, []);
});

test("newestId is the expectedLastId of a rewind; reloaded replaces rows in place and keeps an unsaved reply", () => {
  let state = S.pageLoaded(S.emptyState("c1"), { messages: [row("user", "a", { id: 5 }), row("assistant", "b", { id: 6 })], hasMore: false }, false);
  assert.equal(S.newestId(state), 6);
  assert.equal(S.newestId(S.emptyState("c2")), null);
  state = T.streamInterrupted(T.streamDelta(T.streamStarted(state), "x"), "x");
  state = S.reloaded(state, { messages: [row("user", "a", { id: 5 }), row("assistant", "b", { id: 6 }), row("user", "c", { id: 9 })], hasMore: true });
  assert.deepEqual(state.messages.map((m) => m.key), ["id:5", "id:6", "id:9", state.messages[3].key]);
  assert.equal(state.messages[3].interrupted, true);
  assert.equal(S.newestId(state), 9);
  assert.equal(state.hasMore, true);
});

test("one sample is not samples", () => {
  const state = S.prepared(S.emptyState("c1"), { estimatedTokens: 10, budget: 100, contextWindow: null, calibration: { factor: 1, samples: 1 } });
  assert.match(V.viewOf(state).meter!.detail, /\(1 sample\)/);
});

test("a reload keeps the list starting at the oldest row shown (the scroll position holds)", () => {
  let state = S.pageLoaded(S.emptyState("c1"), { messages: [row("user", "a", { id: 5 }), row("assistant", "b", { id: 6 })], hasMore: true }, false);
  const page = [row("user", "old", { id: 3 }), row("assistant", "old", { id: 4 }), row("user", "a", { id: 5 }), row("assistant", "b", { id: 6 }), row("user", "c", { id: 9 })];
  state = S.reloaded(state, { messages: page, hasMore: false });
  assert.deepEqual(state.messages.map((m) => m.id), [5, 6, 9]);
  assert.equal(state.hasMore, true, "the older rows are a scroll away");
});

test("Edit of a failed prompt: the truncate takes the Retry offer with the prompt, so the same text is appended again (issue 35 item 18)", () => {
  const earlier = [row("user", "first", { id: 20, turn: 1 }), row("assistant", "answer", { id: 21, turn: 1 })];
  let state = S.pageLoaded(S.emptyState("c1"), { messages: earlier, hasMore: false }, false);
  state = T.rowsStored(T.promptSent(state, "why? [500]"), [row("user", "why? [500]", { id: 22, turn: 2 })]);
  state = T.turnFailed(T.streamDiscarded(state), "why? [500]", "The model server answered 500.");
  assert.ok(T.isRetryOf(state, "why? [500]"));
  const rewind = E.rewindFor(state, 22, "edit", "why? [500]");
  assert.deepEqual(rewind, { fromId: 22, prompt: "why? [500]", promptStored: false });
  state = E.truncated(state, rewind!.fromId);
  assert.equal(T.isRetryOf(state, "why? [500]"), false, "the prompt is gone: sending it again appends it");
  assert.equal(state.retry, null);
  assert.deepEqual(state.notices, [], "no Retry is offered for a prompt that is no longer stored");
});

test("Edit of the prompt of an interrupted reply: the partial text, the offer and its notice go with the prompt (issue 35 item 19)", () => {
  let state = S.pageLoaded(S.emptyState("c1"), { messages: [row("user", "q1", { id: 30 }), row("assistant", "a1", { id: 31 })], hasMore: false }, false);
  state = T.rowsStored(T.promptSent(state, "q2 [cut-text]"), [row("user", "q2 [cut-text]", { id: 32, turn: 2 })]);
  state = T.streamInterrupted(T.streamDelta(T.streamStarted(state), "half"), "half");
  state = T.turnFailed(state, "q2 [cut-text]", "cut");
  state = E.truncated(state, 32);
  assert.equal(T.isRetryOf(state, "q2 [cut-text]"), false);
  assert.deepEqual(state.messages.map((m) => m.id), [30, 31], "no interrupted bubble left to Keep after the previous reply");
  assert.deepEqual(state.notices, []);
  // Delete of that exchange does the same; a truncate after the prompt (Regenerate) keeps the offer.
  let failed = T.rowsStored(T.promptSent(S.pageLoaded(S.emptyState("c1"), { messages: [], hasMore: false }, false), "q"), [row("user", "q", { id: 40, turn: 3 })]);
  failed = T.turnFailed(T.streamDiscarded(failed), "q", "500");
  assert.equal(E.turnsDeleted(failed, [3]).retry, null);
  assert.ok(T.isRetryOf(E.truncated(failed, 41), "q"));
});

test("a rewind expects the newest row the screen showed, never the state's (issue 35 item 17, issue 43 item 15)", () => {
  const page = [row("user", "a", { id: 5 }), row("assistant", "b", { id: 6 }), row("user", "c", { id: 9 }), row("assistant", "d", { id: 10 })];
  const state = S.pageLoaded(S.emptyState("c1"), { messages: page, hasMore: false }, false);
  // The webview showed rows 5 and 6; the state already holds 9 and 10 (another window's turn).
  assert.equal(S.seenLastId(6), 6);
  assert.equal(S.seenLastId(null), null, "an empty screen expects an empty chat");
  // Not a row id: what the person saw is unknown, so the click acts on nothing (not on the state's 10).
  for (const bad of [undefined, "6", 6.5, -1, 0, Number.NaN]) assert.equal(S.seenLastId(bad), undefined, String(bad));
  assert.equal(newestStoredId([{ id: null }, { id: 3 }, { id: 2 }]), 3);
  assert.equal(newestStoredId([{ id: null }]), null);
  // The view says which row is its newest, tool results folded into their call included.
  const withTool = S.pageLoaded(S.emptyState("c1"), {
    messages: [row("user", "q", { id: 1 }), row("assistant", "", { id: 2, toolCalls: [{ id: "t", name: "read_file", arguments: {} }] }), row("tool", "file", { id: 3, toolCallId: "t" })],
    hasMore: false,
  }, false);
  assert.deepEqual(V.viewOf(withTool, 4).messages.map((m) => m.id), [1, 2], "the tool row is drawn inside its call");
  assert.equal(V.viewOf(withTool, 4).lastId, 3);
  assert.equal(V.viewOf(state, 4).lastId, 10);
});

test("a click carries the newest row painted before its press, not one drawn since (issue 43 item 15)", () => {
  const seen = new SeenRows();
  assert.equal(seen.clicked(true), undefined, "nothing painted yet: the click acts on nothing");
  seen.painted(6);
  // The person presses on the screen showing row 6; another window's turn (row 10) is drawn and
  // painted before the click is handled (a busy page, a press held down).
  seen.pressed();
  seen.painted(10);
  assert.equal(seen.clicked(true), 6);
  // A key (Enter on a focused button) has no press: what is painted when it is handled.
  assert.equal(seen.clicked(false), 10);
  // The press is used once: a later pointer click without a press of its own (none happens in a
  // browser) falls back to what is painted.
  assert.equal(seen.clicked(true), 10);
  seen.painted(null);
  seen.pressed();
  assert.equal(seen.clicked(true), null, "an empty chat seen");
});

// Version 5: conversation trees

test("version 5: Regenerate branches after the turn's prompt, Edit & resend after the edited prompt's parent; nothing is truncated", () => {
  const rows = [
    row("user", "q1", { id: 10, turn: 1, parentId: null }),
    row("assistant", "a1", { id: 11, turn: 1, parentId: 10 }),
    row("user", "q2", { id: 12, turn: 2, parentId: 11 }),
    row("assistant", "", { id: 13, turn: 2, parentId: 12, toolCalls: [{ id: "t", name: "read_file", arguments: {} }] }),
    row("tool", "file", { id: 14, turn: 2, parentId: 13, toolCallId: "t" }),
    row("assistant", "a2", { id: 15, turn: 2, parentId: 14 }),
  ];
  const state = loaded(rows);
  assert.deepEqual(E.branchFor(state, 12, "edit", "q2 better"), { parentId: 11, prompt: "q2 better", promptStored: false, keep: 2 });
  assert.deepEqual(E.branchFor(state, 10, "edit", "q1 better"), { parentId: null, prompt: "q1 better", promptStored: false, keep: 0 }, "a first prompt's variant is a new first row");
  assert.equal(E.branchFor(state, 11, "edit", "x"), null, "only a user row is edited and resent");
  // A regenerate of a turn with tool rounds answers its prompt again: a sibling of its first reply row.
  assert.deepEqual(E.branchFor(state, 15, "regenerate"), { parentId: 12, prompt: "q2", promptStored: true, keep: 3 });
  assert.deepEqual(E.branchFor(state, 11, "regenerate"), { parentId: 10, prompt: "q1", promptStored: true, keep: 1 });
  assert.equal(E.branchFor(loaded(rows.slice(3)), 15, "regenerate"), null, "the prompt is on an older page");
  // An older server gives no parentId: no branch (the panel rewinds as before).
  assert.equal(E.branchFor(loaded([{ ...row("user", "old", { id: 20 }), parentId: undefined as unknown as null }]), 20, "edit", "x"), null);
  assert.deepEqual(E.branched(state, 3).messages.map((m) => m.id), [10, 11, 12]);
});

test("version 5: a row with variants draws ‹ i/n › whose arrows name the neighbouring siblings; none on an older server or alone", () => {
  const state = loaded([
    row("user", "q", { id: 1, parentId: null }),
    row("assistant", "second", { id: 5, parentId: 1, siblings: { index: 1, count: 3, ids: [2, 5, 9] } }),
  ]);
  const [prompt, reply] = V.viewOf(state, 5).messages;
  assert.equal(prompt!.branch, null, "a row without siblings has no arrows");
  assert.deepEqual(reply!.branch, { index: 2, count: 3, prev: 2, next: 9 });
  assert.equal(V.viewOf(state, 4).messages[1]!.branch, null, "a server before version 5 switches no branch");
  const first = loaded([row("assistant", "a", { id: 2, siblings: { index: 0, count: 2, ids: [2, 5] } })]);
  assert.deepEqual(V.viewOf(first, 5).messages[0]!.branch, { index: 1, count: 2, prev: null, next: 5 });
  const elsewhere = { ...state, elsewhere: { workspace: "file:///old", name: "old" } };
  assert.equal(V.viewOf(elsewhere, 5).messages[1]!.branch, null, "another workspace's chat is read-only here");
  assert.equal(V.branchOf(T.promptSent(state, "x").messages.at(-1)!, 5), null, "not before it is stored");
});

test("version 5: a switched branch replaces the rows shown and shows the row switched to; a stale offer goes with its prompt", () => {
  const before = T.turnFailed(loaded([row("user", "q", { id: 1 }), row("user", "again", { id: 3 })]), "again", "The model failed.");
  assert.ok(before.retry !== null);
  const after = S.branchShown(before, { messages: [row("user", "q", { id: 1 }), row("assistant", "a", { id: 2, parentId: 1 })], hasMore: true }, 2);
  assert.deepEqual(after.messages.map((m) => m.id), [1, 2]);
  assert.equal(after.hasMore, true);
  assert.equal(after.focusId, 2);
  assert.equal(after.retry, null, "the failed prompt is on another branch now");
  assert.equal(after.messages[1]!.parentId, 1);
});
