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
