/**
 * Replies stored while they stream (protocol version 4), as pure rules on the panel's state: the
 * streaming bubble takes its stored row's id, a cut reply stored as interrupted is offered
 * Continue, Retry and Keep, and Continue streams into that same bubble. No `vscode`, no I/O.
 */

import type { StoredMessage } from "chat-history-client";
import { addNotice, dropNotice, TURN_NOTICE, type Notice, type PanelMessage, type PanelState } from "./state";

/** The id of the derived notice that offers Continue, Retry and Keep (not in `state.notices`). */
export const CUT_NOTICE_ID = -1;

/** What the words say when this window did not see the reply stop (a reload, a crash). */
export const CUT_WORDS_GENERAL = "This reply was interrupted before it was complete (the window closed, or the editor or its server stopped).";

/** The streaming row was stored (`beginReply`): the streaming bubble is that row from now on. */
export function replyBegun(state: PanelState, row: StoredMessage): PanelState {
  const index = state.messages.findLastIndex((m) => m.streaming);
  if (index < 0) return state;
  const messages = [...state.messages];
  messages[index] = { ...messages[index], key: `id:${row.id}`, id: row.id, turn: row.turn, status: "streaming" };
  return { ...state, messages };
}

/** A stored row streams while this window runs no turn: another window's reply, or an orphan. */
export function othersStreaming(state: PanelState): boolean {
  return !state.busy && state.messages.some((m) => m.id !== null && m.streaming);
}

/** The newest row when it is a cut reply stored as interrupted that the person has not kept. */
export function cutReply(state: PanelState): { reply: PanelMessage; prompt: PanelMessage | null } | null {
  if (state.busy || state.elsewhere !== null) return null;
  const stored = state.messages.filter((m) => m.id !== null);
  const reply = stored.at(-1);
  if (reply === undefined || reply.role !== "assistant" || reply.status !== "interrupted" || reply.id === state.keptCut) return null;
  if (state.messages.some((m) => m.id === null)) return null;
  const prompt = stored.findLast((m) => m.role === "user" && m.id! < reply.id!) ?? null;
  return { reply, prompt };
}

/**
 * Whether the offer of {@link cutReply} is the one the person clicked: it stands for the newest
 * row, so the newest row they saw (`seenId`) must be that reply. False when the state moved on
 * (another window's turn came in, not shown yet): the click then acts on nothing.
 */
export function cutSeen(state: PanelState, seenId: number | null | undefined): boolean {
  const cut = cutReply(state);
  return cut !== null && seenId !== undefined && cut.reply.id === seenId;
}

/** The notice of {@link cutReply}: why it stopped, what is saved, and the three choices. */
export function cutNotice(state: PanelState): Notice | null {
  const cut = cutReply(state);
  if (cut === null) return null;
  const why = state.cutWords ?? CUT_WORDS_GENERAL;
  const actions: Notice["actions"] = cut.prompt === null ? ["continue", "keepCut"] : ["continue", "retryCut", "keepCut"];
  return {
    id: CUT_NOTICE_ID,
    kind: "error",
    text: `${why} The text shown is saved: Continue it, Retry from the prompt, or Keep it as it is.`,
    actions,
  };
}

/** Why a reply stopped when its history server did (the language client starts a new one). */
export const SERVER_STOPPED = "The chat history server stopped in the middle of the reply";

/**
 * The reply's end could not be stored (its history server stopped): the bubble stops growing,
 * since nothing more of it is stored, and a notice says what the panel is doing (`words`) while it
 * ends the row through the server running now. The turn is still on ({@link cutStored} ends it).
 */
export function replyUnsettled(state: PanelState, words: string): PanelState {
  const messages = state.messages.map((m) => (m.streaming ? { ...m, streaming: false } : m));
  return addNotice({ ...state, messages }, "info", words, TURN_NOTICE);
}

/** A cut reply stopped in this window: the turn is over and the offer says why. */
export function cutStored(state: PanelState, words: string): PanelState {
  return { ...dropNotice(state, TURN_NOTICE), busy: false, retry: null, cutWords: words };
}

/** Continue: the cut reply's bubble streams again (the same row, the same key). */
export function continueStarted(state: PanelState, id: number): PanelState {
  const messages = state.messages.map((m) => (m.id === id ? { ...m, streaming: true, status: "streaming" as const } : m));
  return { ...dropNotice(state, TURN_NOTICE), messages, busy: true, retry: null, cutWords: null };
}

/** Keep: the cut reply stays as it is stored; its offer goes. */
export function cutKept(state: PanelState, id: number): PanelState {
  return { ...state, keptCut: id, cutWords: null };
}
