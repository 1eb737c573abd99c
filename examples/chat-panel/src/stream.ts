/**
 * A turn on the panel, as pure rules on its state: the prompt shown at once, the reply streaming
 * into its bubble, rows replaced by what was stored, a failure or interruption with its Retry and
 * Keep. No `vscode`, no I/O.
 */

import type { StoredMessage, ToolCall } from "chat-history-client";
import { addNotice, dropNotice, fromStored, TURN_NOTICE, type NoticeAction, type PanelMessage, type PanelState, type RetryOffer } from "./state";

/** A prompt was sent: show it at once (stored later) and mark the panel busy. */
export function promptSent(state: PanelState, text: string): PanelState {
  const message: PanelMessage = {
    key: `local:${state.nextLocal}`,
    id: null,
    turn: null,
    role: "user",
    content: text,
    toolCalls: [],
    toolCallId: null,
    name: null,
    streaming: false,
  };
  return { ...state, busy: true, messages: [...state.messages, message], nextLocal: state.nextLocal + 1 };
}

/**
 * Rows `append` stored. Each replaces the panel's unsaved row of the same role and content
 * (the optimistic prompt, a finished stream) when there is one; the others are added.
 */
export function rowsStored(state: PanelState, rows: StoredMessage[]): PanelState {
  let messages = [...state.messages];
  for (const row of rows) {
    // A row shown already (a reply stored while it streamed) is replaced by what was stored.
    const same = messages.findIndex((m) => m.id === row.id);
    if (same >= 0) {
      messages[same] = fromStored(row);
      continue;
    }
    // An interrupted reply is never the stored one: it stays what it was (or goes with Retry).
    const local = messages.findIndex(
      (m) => m.id === null && !m.interrupted && m.role === row.role && (m.role !== "user" || m.content === row.content),
    );
    if (local >= 0) messages[local] = fromStored(row);
    else messages = [...messages, fromStored(row)];
  }
  return { ...state, messages };
}

/** A reply starts streaming (a continued reply streams in its own bubble, already there). */
export function streamStarted(state: PanelState): PanelState {
  if (state.messages.some((m) => m.streaming)) return state;
  const message: PanelMessage = {
    key: `local:${state.nextLocal}`,
    id: null,
    turn: null,
    role: "assistant",
    content: "",
    toolCalls: [],
    toolCallId: null,
    name: null,
    streaming: true,
  };
  return { ...state, messages: [...state.messages, message], nextLocal: state.nextLocal + 1 };
}

function updateStreaming(state: PanelState, update: (m: PanelMessage) => PanelMessage): PanelState {
  const index = state.messages.findLastIndex((m) => m.streaming);
  if (index < 0) return state;
  const messages = [...state.messages];
  messages[index] = update(messages[index]);
  return { ...state, messages };
}

export function streamDelta(state: PanelState, text: string): PanelState {
  return updateStreaming(state, (m) => ({ ...m, content: m.content + text }));
}

/** The stream ended (the row is stored next, by {@link rowsStored}). */
export function streamEnded(state: PanelState, toolCalls: ToolCall[] = []): PanelState {
  return updateStreaming(state, (m) => ({ ...m, streaming: false, toolCalls }));
}

/** A stream that failed or was retried: its partial text goes away. */
export function streamDiscarded(state: PanelState): PanelState {
  return { ...state, messages: state.messages.filter((m) => !m.streaming) };
}

/**
 * The reply stopped before it was complete: the bubble keeps the text that arrived, marked
 * interrupted, with no tool calls (a half-written call is never shown as running); without text
 * it goes. A finished reply not stored yet (stopped before it was) is treated the same.
 */
export function streamInterrupted(state: PanelState, partial: string): PanelState {
  const index = state.messages.findLastIndex((m) => m.id === null && m.role === "assistant" && !m.interrupted);
  if (index < 0) return state;
  if (partial === "") return { ...state, messages: state.messages.filter((_, i) => i !== index) };
  const messages = [...state.messages];
  messages[index] = { ...messages[index], content: partial, streaming: false, toolCalls: [], interrupted: true };
  return { ...state, messages };
}

/**
 * The turn for `prompt` failed (`words`: what happened, in words) or was interrupted: the panel is
 * free, rows not stored go (but an interrupted reply's text stays, to keep), the prompt is marked
 * failed, and one notice offers Retry (and Keep when text arrived). It replaces the notice of an
 * earlier failure: notices do not pile up.
 */
export function turnFailed(state: PanelState, prompt: string, words: string): PanelState {
  // Rows not stored go (a prompt never stored is not shown as if it were; Retry sends it),
  // except the interrupted reply's text.
  const messages = state.messages.filter((m) => m.id !== null || m.interrupted);
  const stored = messages.findLast((m) => m.role === "user" && m.id !== null && m.content === prompt);
  const partial = messages.findLast((m) => m.interrupted)?.content ?? "";
  const retry: RetryOffer = { prompt, promptId: stored?.id ?? null, partial };
  const actions: NoticeAction[] = partial === "" ? ["retry"] : ["retry", "keep"];
  const next = { ...state, messages, busy: false, retry };
  return addNotice(next, "error", words, TURN_NOTICE, actions);
}

/** Retry: the interrupted reply and the failure notice go; the turn runs again. */
export function retryStarted(state: PanelState): PanelState {
  return {
    ...dropNotice(state, TURN_NOTICE),
    messages: state.messages.filter((m) => !m.interrupted),
    retry: null,
    busy: true,
  };
}

/** Keep: the interrupted reply was stored as it was (`rows`); the offer and its notice go. */
export function partialKept(state: PanelState, rows: StoredMessage[]): PanelState {
  const kept = { ...state, messages: state.messages.filter((m) => !m.interrupted), retry: null };
  return rowsStored(dropNotice(kept, TURN_NOTICE), rows);
}

/** A turn completed: what an earlier failure left (its notice, its offer) is resolved. */
export function turnSucceeded(state: PanelState): PanelState {
  return { ...dropNotice(turnFinished(state), TURN_NOTICE), retry: null };
}

/** Whether sending `text` now is a retry of the failed turn (the same prompt, stored, unanswered). */
export function isRetryOf(state: PanelState, text: string): boolean {
  const offer = state.retry;
  return offer !== null && offer.promptId !== null && offer.prompt === text && state.messages.some((m) => m.id === offer.promptId);
}

export function turnFinished(state: PanelState): PanelState {
  return { ...streamEnded(state), busy: false };
}
