/** The panel's rules for replies stored while they stream (src/replies.ts, with src/state.ts and src/stream.ts). */

import assert from "node:assert/strict";
import { test } from "node:test";
import type { StoredMessage } from "chat-history-client";
import * as R from "../src/replies";
import * as S from "../src/state";
import * as T from "../src/stream";
import * as V from "../src/view";

function row(id: number, role: StoredMessage["role"], content: string, status: StoredMessage["status"] = "complete"): StoredMessage {
  return {
    id,
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
    status,
    parentId: null,
    siblings: { index: 0, count: 1, ids: [id] },
    origin: null,
  };
}

const cutPage = { messages: [row(1, "user", "Tell me"), row(2, "assistant", "This reply stops in", "interrupted")], hasMore: false };

test("the streaming bubble takes its stored row's id; the reply stored complete replaces it in place", () => {
  let state = T.streamStarted(T.promptSent(S.emptyState("c"), "hi"));
  state = T.rowsStored(state, [row(1, "user", "hi")]);
  state = R.replyBegun(state, row(2, "assistant", "", "streaming"));
  state = T.streamDelta(state, "Hel");
  assert.deepEqual(state.messages.map((m) => [m.key, m.streaming, m.content]), [["id:1", false, "hi"], ["id:2", true, "Hel"]]);
  state = T.rowsStored(T.streamEnded(T.streamDelta(state, "lo")), [row(2, "assistant", "Hello")]);
  assert.deepEqual(state.messages.map((m) => [m.key, m.streaming, m.content, m.status]), [["id:1", false, "hi", "complete"], ["id:2", false, "Hello", "complete"]]);
});

test("a conversation opened with a cut reply newest: it shows marked and saved, offered Continue, Retry and Keep", () => {
  const state = S.pageLoaded(S.emptyState("c"), cutPage, false);
  const view = V.viewOf(state, 4);
  assert.deepEqual(view.messages.map((m) => [m.content, m.interrupted, m.saved]), [["Tell me", false, false], ["This reply stops in", true, true]]);
  const offer = view.notices.find((n) => n.id === R.CUT_NOTICE_ID);
  assert.deepEqual(offer?.actions, ["continue", "retryCut", "keepCut"]);
  assert.match(offer!.text, /interrupted before it was complete.*The text shown is saved/);
  // Why it stopped, when this window saw it: those words instead.
  const here = R.cutStored(state, "You stopped the reply.");
  assert.match(V.viewOf(here, 4).notices.at(-1)!.text, /^You stopped the reply\. The text shown is saved/);
});

test("the offer goes once the cut reply is kept, is not the newest row, or a turn runs; a streaming row is no offer", () => {
  const state = S.pageLoaded(S.emptyState("c"), cutPage, false);
  const offered = (s: S.PanelState) => V.viewOf(s, 4).notices.some((n) => n.id === R.CUT_NOTICE_ID);
  assert.ok(offered(state));
  assert.ok(!offered(R.cutKept(state, 2)));
  assert.ok(!offered(T.promptSent(state, "next")));
  assert.ok(!offered(T.rowsStored(state, [row(3, "user", "next")])));
  const streaming = S.pageLoaded(S.emptyState("c"), { messages: [row(1, "user", "Tell me"), row(2, "assistant", "This", "streaming")], hasMore: false }, false);
  assert.ok(!offered(streaming));
  assert.equal(V.viewOf(streaming, 4).messages[1].streaming, true, "another window's reply shows as growing");
  assert.ok(R.othersStreaming(streaming), "re-read until it is no longer streaming");
  assert.ok(!R.othersStreaming(state) && !R.othersStreaming({ ...streaming, busy: true }));
});

test("Continue streams into the same bubble: same key, no second bubble, the stored row replaces it", () => {
  let state = R.continueStarted(S.pageLoaded(S.emptyState("c"), cutPage, false), 2);
  assert.equal(state.busy, true);
  state = T.streamStarted(state);
  assert.equal(state.messages.length, 2, "no new bubble");
  state = T.streamDelta(state, " the middle.");
  assert.deepEqual(state.messages.map((m) => [m.key, m.content]), [["id:1", "Tell me"], ["id:2", "This reply stops in the middle."]]);
  state = T.turnFinished(T.rowsStored(state, [row(2, "assistant", "This reply stops in the middle.")]));
  const view = V.viewOf(state, 4);
  assert.deepEqual(view.messages.map((m) => [m.key, m.interrupted]), [["id:1", false], ["id:2", false]]);
  assert.ok(!view.notices.some((n) => n.id === R.CUT_NOTICE_ID));
});

test("a choice of the cut reply's offer acts only on the reply the screen showed as the newest row (issue 43 item 15)", () => {
  const state = S.pageLoaded(S.emptyState("c"), cutPage, false);
  assert.equal(R.cutSeen(state, 2), true);
  assert.equal(R.cutSeen(state, undefined), false, "what the person saw is unknown");
  // Another window's turn came in after the cut reply (the state has it, the screen does not):
  // the offer is now for that turn's reply, not the one the person chose for.
  const moved = S.reloaded(state, { messages: [...cutPage.messages, row(3, "user", "More"), row(4, "assistant", "half", "interrupted")], hasMore: false });
  assert.equal(R.cutReply(moved)?.reply.id, 4);
  assert.equal(R.cutSeen(moved, 2), false);
  assert.equal(R.cutSeen(moved, 4), true);
});

test("the history server stopped mid-reply: the bubble stops growing and says so, then shows the reply as stored with one offer (issue 43 item 14)", () => {
  let state = T.rowsStored(T.streamStarted(T.promptSent(S.emptyState("c"), "Tell me")), [row(1, "user", "Tell me")]);
  state = T.streamDelta(R.replyBegun(state, row(2, "assistant", "", "streaming")), "This reply stops in the middle of it");
  state = R.replyUnsettled(state, `${R.SERVER_STOPPED}; it is being restarted. Saving what it stored…`);
  assert.equal(state.busy, true, "the turn is on until the row is ended");
  assert.deepEqual(state.messages.map((m) => m.streaming), [false, false], "nothing more is shown than is stored");
  assert.deepEqual(V.viewOf(state, 4).notices.map((n) => n.text), [`${R.SERVER_STOPPED}; it is being restarted. Saving what it stored…`]);
  // Ended through the new server (the row replaced by its stored text, interrupted) and read again.
  state = S.reloaded(state, { messages: [row(1, "user", "Tell me"), row(3, "assistant", "This reply stops in", "interrupted")], hasMore: false });
  state = R.cutStored(T.turnFinished(state), `${R.SERVER_STOPPED} and was restarted.`);
  const view = V.viewOf(state, 4);
  assert.deepEqual(view.messages.map((m) => [m.id, m.content, m.interrupted, m.saved, m.failed]), [
    [1, "Tell me", false, false, false],
    [3, "This reply stops in", true, true, false],
  ]);
  assert.equal(view.notices.length, 1, "one notice: the offer, in words that say what happened");
  assert.match(view.notices[0].text, /^The chat history server stopped in the middle of the reply and was restarted\. The text shown is saved/);
  assert.deepEqual(view.notices[0].actions, ["continue", "retryCut", "keepCut"]);
});
