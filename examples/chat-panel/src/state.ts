/**
 * The chat panel's state and every rule about it, as pure functions: no `vscode`, no DOM, no I/O.
 * The extension owns one {@link PanelState}, applies these functions to it as events arrive
 * (pages from `get`, rows from `append`, stream deltas, `prepare` results, trim notifications)
 * and posts {@link viewOf} to the webview, which only draws what it is given.
 */

import { codePointSpanToUtf16 } from "chat-history-client";
import type { MessageStatus, PreparedRequest, SearchResultItem, StoredMessage, ToolCall, TrimmedNotification } from "chat-history-client";
import { cutNotice } from "./replies";
import { newestStoredId } from "./rows";

/** A row of the conversation as the panel holds it: a stored row, or one not stored yet. */
export interface PanelMessage {
  /** Stable key for the view: `id:<n>` once stored, `local:<n>` before. */
  key: string;
  id: number | null;
  /** The turn the row belongs to (null before it is stored). */
  turn: number | null;
  role: StoredMessage["role"];
  content: string;
  toolCalls: ToolCall[];
  toolCallId: string | null;
  name: string | null;
  /** The reply is still arriving. */
  streaming: boolean;
  /** A reply that stopped before it was complete: shown, never stored (unless the person keeps it). */
  interrupted?: boolean;
  /** Version 4: the stored row's status ("interrupted": a cut reply stored as far as it got). */
  status?: MessageStatus;
}

export interface ContextMeter {
  estimatedTokens: number;
  budget: number | null;
  contextWindow: number | null;
  /** Prompt tokens the provider reported for the last request. */
  providerPromptTokens: number | null;
  /** Of those, the ones its prompt cache served (null: it did not say). */
  providerCachedTokens?: number | null;
  /** The server's calibration of this provider and model (`estimatedTokens` is calibrated by it). */
  calibration: { factor: number; samples: number } | null;
}

/** The conversation's summary as the panel shows it ("earlier turns summarized", with Undo). */
export interface SummaryBanner {
  coversThroughId: number | null;
  /** Turns it stands in for, when known (from the proposal or the last prepare). */
  turns: number | null;
}

/** One search hit as the webview draws it: the snippet cut into plain and highlighted parts. */
export interface SearchHitView {
  conversationId: string;
  id: number;
  role: StoredMessage["role"];
  title: string;
  parts: { text: string; hit: boolean }[];
}

export interface SearchView {
  query: string;
  hits: SearchHitView[];
  hasMore: boolean;
}

export type NoticeKind = "request" | "storage" | "error" | "info";
/**
 * Buttons a notice offers: run the failed turn again, keep an interrupted reply's text; for a
 * cut reply stored as interrupted (version 4): continue it in its row, retry it, keep it as it is.
 */
export type NoticeAction = "retry" | "keep" | "continue" | "retryCut" | "keepCut";
export interface Notice {
  id: number;
  kind: NoticeKind;
  text: string;
  /** Notices with the same key describe the same standing condition: the newest replaces the older. */
  key?: string;
  actions?: NoticeAction[];
}

/** A turn that failed or was interrupted, and what Retry and Keep need. */
export interface RetryOffer {
  /** The prompt to run again. */
  prompt: string;
  /** Its stored row (Retry runs the turn again without appending it), or null if it was not stored. */
  promptId: number | null;
  /** The text of the interrupted reply ("" when none arrived). */
  partial: string;
}

/** The key of the notice of a failed or interrupted turn (cleared by the next turn that completes). */
export const TURN_NOTICE = "turn";
/** The key of the notice that the conversation changed in another window. */
export const CHANGED_NOTICE = "changed";

export interface PanelState {
  conversationId: string;
  title: string;
  /** Oldest first. */
  messages: PanelMessage[];
  /** Older rows exist in the store (load them with `get` `beforeId` = {@link oldestId}). */
  hasMore: boolean;
  loadingOlder: boolean;
  /** A turn (prompt → reply, tool rounds included) is running. */
  busy: boolean;
  meter: ContextMeter | null;
  notices: Notice[];
  nextLocal: number;
  nextNotice: number;
  summary: SummaryBanner | null;
  /** A compaction is being written in the background. */
  compacting: boolean;
  search: SearchView | null;
  /** Scroll to this row (a search hit opened); cleared by the next view change of the list. */
  focusId: number | null;
  /** The last turn failed or was interrupted: Retry (and Keep) are offered. */
  retry: RetryOffer | null;
  /**
   * A conversation of another workspace, opened from "all workspaces": shown read-only (its rows
   * are read with its `workspace`); Continue copies it here. Null: this workspace's.
   */
  elsewhere: Elsewhere | null;
  /** A cut reply the person chose to Keep as it is (its offer is not shown again). */
  keptCut: number | null;
  /** Why the newest cut reply stopped, when this window saw it stop (else the offer says it generally). */
  cutWords: string | null;
  /** The tool an imported conversation came from ("Claude Code"); null or absent: not imported. */
  source?: string | null;
}

/** The workspace a conversation shown read-only belongs to. */
export interface Elsewhere {
  workspace: string;
  /** Its name as the list shows it (the folder's name). */
  name: string;
}

export const MAX_NOTICES = 5;

export function emptyState(conversationId: string, title = "New chat", elsewhere: Elsewhere | null = null): PanelState {
  return {
    conversationId,
    title,
    messages: [],
    hasMore: false,
    loadingOlder: false,
    busy: false,
    meter: null,
    notices: [],
    nextLocal: 1,
    nextNotice: 1,
    summary: null,
    compacting: false,
    search: null,
    focusId: null,
    retry: null,
    elsewhere,
    keptCut: null,
    cutWords: null,
  };
}

/** The key of the conversation shown, for the requests that read it (its workspace when it is another's). */
export function keyOf(state: PanelState): { conversationId: string; workspace?: string } {
  return state.elsewhere === null ? { conversationId: state.conversationId } : { conversationId: state.conversationId, workspace: state.elsewhere.workspace };
}

/** The banner over a conversation of another workspace: why it is read-only and what can be done. */
export function elsewhereText(elsewhere: Elsewhere | null): string | null {
  if (elsewhere === null) return null;
  return `This chat belongs to the workspace "${elsewhere.name}" and is read-only here. To reply, continue it in this workspace (a copy; the original stays there) or move that workspace's history here.`;
}

function fromStored(row: StoredMessage): PanelMessage {
  return {
    key: `id:${row.id}`,
    id: row.id,
    turn: row.turn,
    role: row.role,
    content: row.content,
    toolCalls: row.toolCalls,
    toolCallId: row.toolCallId,
    name: row.name,
    streaming: row.status === "streaming",
    status: row.status,
  };
}

/** The newest stored row the panel's state holds (null: none). */
export function newestId(state: PanelState): number | null {
  return newestStoredId(state.messages);
}

/**
 * A rewind's `expectedLastId`: the newest stored row the person could see when they clicked
 * (`seenId`, sent by the webview from what it drew), not the state's, which can be a redraw
 * ahead of the screen (another window's turn arrived, not drawn yet). Without a valid one (an
 * older webview), the state's.
 */
export function expectedLastId(state: PanelState, seenId: unknown): number | null {
  if (seenId === null || (typeof seenId === "number" && Number.isSafeInteger(seenId) && seenId > 0)) return seenId;
  return newestId(state);
}

/**
 * The conversation again after another window changed it (or a stale rewind was refused): the
 * stored rows of `page` replace the shown ones; a reply not stored (interrupted, offered to keep)
 * stays at the end. Rows that did not change keep their keys, so the view redraws nothing else.
 */
export function reloaded(state: PanelState, page: { messages: StoredMessage[]; hasMore: boolean }): PanelState {
  const local = state.messages.filter((m) => m.id === null);
  // The rows from the oldest one shown on: the list starts where it started (the scroll position
  // holds), and older rows stay a scroll away.
  const oldest = oldestId(state);
  const kept = oldest === null ? page.messages : page.messages.filter((row) => row.id >= oldest);
  const hasMore = page.hasMore || kept.length < page.messages.length;
  const stored = kept.map(fromStored);
  return withoutStaleRetry({ ...state, messages: [...stored, ...local], hasMore, loadingOlder: false });
}

/**
 * The offer of a failed or interrupted turn holds only while its stored prompt is still shown:
 * once a rewind (Edit, Delete) or another window removed that row, Retry would run the turn on
 * a conversation without its prompt (an empty request, a reply after the previous turn's). The
 * offer, its notice and the interrupted reply's text go with the prompt.
 */
function withoutStaleRetry(state: PanelState): PanelState {
  const promptId = state.retry?.promptId ?? null;
  if (promptId === null || state.messages.some((m) => m.id === promptId)) return state;
  return { ...dropNotice(state, TURN_NOTICE), messages: state.messages.filter((m) => !m.interrupted), retry: null };
}

/** The id to pass as `beforeId` for the next older page, or null when nothing is loaded. */
export function oldestId(state: PanelState): number | null {
  for (const m of state.messages) if (m.id !== null) return m.id;
  return null;
}

/**
 * A page from `get`: the newest page replaces the list (`older` false); an older page goes in
 * front of it. Rows already shown are not shown twice.
 */
export function pageLoaded(
  state: PanelState,
  page: { messages: StoredMessage[]; hasMore: boolean },
  older: boolean,
): PanelState {
  const rows = page.messages.map(fromStored);
  if (!older) return { ...state, messages: rows, hasMore: page.hasMore, loadingOlder: false };
  const shown = new Set(state.messages.map((m) => m.id));
  const fresh = rows.filter((m) => !shown.has(m.id));
  return { ...state, messages: [...fresh, ...state.messages], hasMore: page.hasMore, loadingOlder: false };
}

export function olderRequested(state: PanelState): PanelState {
  return { ...state, loadingOlder: true };
}

/** Whether scrolling to the top should fetch another page now. */
export function shouldLoadOlder(state: PanelState): boolean {
  return state.hasMore && !state.loadingOlder && oldestId(state) !== null;
}

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

export function prepared(
  state: PanelState,
  request: Pick<PreparedRequest, "estimatedTokens" | "budget" | "contextWindow"> & Partial<Pick<PreparedRequest, "calibration" | "compactedTurns">>,
): PanelState {
  const meter: ContextMeter = {
    estimatedTokens: request.estimatedTokens,
    budget: request.budget,
    contextWindow: request.contextWindow,
    providerPromptTokens: null,
    calibration: request.calibration ?? null,
  };
  // A summary in force says how many turns it stood in for in this request.
  const summary =
    state.summary !== null && request.compactedTurns ? { ...state.summary, turns: request.compactedTurns } : state.summary;
  return { ...state, meter, summary };
}

/** The server's calibration after `reportUsage`. */
export function calibrated(state: PanelState, calibration: { factor: number; samples: number }): PanelState {
  if (state.meter === null) return state;
  return { ...state, meter: { ...state.meter, calibration } };
}

/** A compaction started (true) or ended without a summary (false). */
export function compacting(state: PanelState, running: boolean): PanelState {
  return { ...state, compacting: running };
}

/** The conversation's summary (from `getSummary`, a saved compaction), or null after Undo. */
export function summaryShown(state: PanelState, summary: SummaryBanner | null): PanelState {
  return { ...state, summary, compacting: false };
}

/** The text of the banner, or null when there is none. */
export function summaryText(summary: SummaryBanner | null): string | null {
  if (summary === null) return null;
  const turns = summary.turns === null ? "Earlier turns" : plural(summary.turns, "earlier turn");
  return `${turns} summarized: the model gets the summary instead of them (they stay in the history).`;
}

// ---------------------------------------------------------------------------------------------
// Rewinding: which row an edit, a regenerate or a delete starts from

/** What edit-and-resend or regenerate does to the stored rows, found from the loaded ones. */
export interface Rewind {
  /** `truncate` from this row (it and every later row go). */
  fromId: number;
  /** The prompt to run again: the edited text (edit) or the stored prompt kept (regenerate). */
  prompt: string;
  /** Whether the prompt is still stored (regenerate) or must be appended (edit). */
  promptStored: boolean;
}

/**
 * Edit and resend on a user row: truncate from that row, then send `text` as a new prompt.
 * Regenerate on any row of a turn: truncate from the first row after the turn's prompt and run
 * the turn again. Null when the row is not stored, or (regenerate) when the turn's prompt is not
 * loaded or nothing follows it.
 */
export function rewindFor(state: PanelState, key: string, kind: "edit" | "regenerate", text = ""): Rewind | null {
  const index = state.messages.findIndex((m) => m.key === key);
  const target = state.messages[index];
  if (target === undefined || target.id === null) return null;
  if (kind === "edit") {
    if (target.role !== "user") return null;
    return { fromId: target.id, prompt: text, promptStored: false };
  }
  // The turn's prompt: the nearest user row at or before the target in the same turn.
  let promptIndex = -1;
  for (let i = index; i >= 0; i--) {
    const m = state.messages[i];
    if (m.role === "user" && m.turn === target.turn) {
      promptIndex = i;
      break;
    }
  }
  if (promptIndex < 0) return null;
  const after = state.messages.slice(promptIndex + 1).find((m) => m.id !== null);
  if (after?.id == null) return null;
  return { fromId: after.id, prompt: state.messages[promptIndex].content, promptStored: true };
}

/** Rows of the panel that a `truncate` from `fromId` removed. */
export function truncated(state: PanelState, fromId: number): PanelState {
  return withoutStaleRetry({ ...state, messages: state.messages.filter((m) => m.id === null || m.id < fromId) });
}

/** Rows of the panel that a `deleteTurns` removed. */
export function turnsDeleted(state: PanelState, turns: number[]): PanelState {
  const gone = new Set(turns);
  return withoutStaleRetry({ ...state, messages: state.messages.filter((m) => m.turn === null || !gone.has(m.turn)) });
}

/** A row `editMessage` changed. */
export function rowEdited(state: PanelState, row: StoredMessage): PanelState {
  return { ...state, messages: state.messages.map((m) => (m.id === row.id ? fromStored(row) : m)) };
}

export const REDACTED = "[redacted]";

/**
 * The content after redacting `secret` from it: every occurrence replaced by "[redacted]", or the
 * whole content when `secret` is empty. Null when `secret` does not occur (nothing to change).
 */
export function redact(content: string, secret: string): string | null {
  if (secret === "") return content === REDACTED ? null : REDACTED;
  if (!content.includes(secret)) return null;
  return content.split(secret).join(REDACTED);
}

// ---------------------------------------------------------------------------------------------
// Search

/** A snippet cut at its highlights (code point offsets, as the server sends them). */
export function snippetParts(snippet: string, highlights: Array<[number, number]>): { text: string; hit: boolean }[] {
  const spans = highlights
    .map((h) => codePointSpanToUtf16(snippet, h))
    .filter(([a, b]) => a >= 0 && b > a)
    .sort((x, y) => x[0] - y[0]);
  const parts: { text: string; hit: boolean }[] = [];
  let at = 0;
  for (const [start, end] of spans) {
    if (end <= at) continue;
    const from = Math.max(start, at);
    if (from > at) parts.push({ text: snippet.slice(at, from), hit: false });
    parts.push({ text: snippet.slice(from, end), hit: true });
    at = end;
  }
  if (at < snippet.length) parts.push({ text: snippet.slice(at), hit: false });
  return parts;
}

export function searchShown(
  state: PanelState,
  query: string,
  result: { results: SearchResultItem[]; hasMore: boolean },
  titles: ReadonlyMap<string, string>,
): PanelState {
  const hits = result.results.map((r) => ({
    conversationId: r.conversationId,
    id: r.id,
    role: r.role,
    title: titles.get(r.conversationId) ?? r.conversationId,
    parts: snippetParts(r.snippet, r.highlights),
  }));
  return { ...state, search: { query, hits, hasMore: result.hasMore } };
}

export function searchClosed(state: PanelState): PanelState {
  return { ...state, search: null };
}

/** Whether the row `id` is in the loaded rows (else load the page that holds it). */
export function isLoaded(state: PanelState, id: number): boolean {
  return state.messages.some((m) => m.id === id);
}

/** Export: the conversation as Markdown (what is loaded: the caller loads every page first). */
export function toMarkdown(title: string, rows: Pick<StoredMessage, "role" | "content" | "toolCalls" | "name">[]): string {
  const out = [`# ${title}`, ""];
  for (const row of rows) {
    const who = ROLE_TITLES[row.role] ?? row.role;
    out.push(`## ${row.role === "tool" ? `${who} (${row.name ?? "tool"})` : who}`, "");
    if (row.content !== "") out.push(row.role === "tool" ? fence(row.content) : row.content, "");
    for (const call of row.toolCalls) out.push(`Tool call \`${call.name}\`:`, "", fence(argumentsText(call.arguments)), "");
  }
  return out.join("\n");
}

const ROLE_TITLES: Record<string, string> = { user: "You", assistant: "Assistant", system: "System", tool: "Tool result" };

function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const ticks = "`".repeat(longest + 1);
  return `${ticks}\n${text}\n${ticks}`;
}

export function usageReported(state: PanelState, promptTokens: number, cachedTokens: number | null = null): PanelState {
  if (state.meter === null) return state;
  return { ...state, meter: { ...state.meter, providerPromptTokens: promptTokens, providerCachedTokens: cachedTokens } };
}

export function addNotice(state: PanelState, kind: NoticeKind, text: string, key?: string, actions?: NoticeAction[]): PanelState {
  // The same words again (an error repeated) replace the older notice: they never pile up.
  const kept = state.notices.filter((n) => (key === undefined ? n.text !== text : n.key !== key));
  const notice: Notice = { id: state.nextNotice, kind, text, ...(key === undefined ? {} : { key }), ...(actions ? { actions } : {}) };
  const notices = [...kept, notice].slice(-MAX_NOTICES);
  return { ...state, notices, nextNotice: state.nextNotice + 1 };
}

/** The notice of a standing condition, gone once it is resolved. */
export function dropNotice(state: PanelState, key: string): PanelState {
  return { ...state, notices: state.notices.filter((n) => n.key !== key) };
}

export function dismissNotice(state: PanelState, id: number): PanelState {
  return { ...state, notices: state.notices.filter((n) => n.id !== id) };
}

export function plural(n: number, word: string): string {
  return `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;
}

/** The words a person reads for a `chatHistory/trimmed` notification. */
export function trimNoticeText(event: TrimmedNotification): string {
  if (event.scope === "storage") {
    const why = { age: "age limit", count: "message limit", tokens: "token limit" }[event.reason];
    return `${plural(event.droppedMessages, "message")} deleted by your retention settings (${why}).`;
  }
  const why = {
    tokenBudget: `to fit the ${event.budget === null ? "token" : event.budget.toLocaleString("en-US") + "-token"} budget`,
    turnLimit: "by the turn limit",
    overflowRecovery: "after the model reported its context was full",
  }[event.reason];
  return `${plural(event.droppedMessages, "earlier message")} not sent ${why}; they stay in the history.`;
}

/**
 * A trim notification: shown when it is about this conversation. A storage trim also removes
 * rows from the panel, since they are gone for good; the caller reloads the newest page.
 */
export function trimmed(state: PanelState, event: TrimmedNotification): PanelState {
  if (event.conversationId !== state.conversationId) return state;
  // What a request left out is a standing condition: each request restates it, so the newest
  // notice of a reason replaces the last one (else every turn stacks another banner). Storage
  // deletions are separate events and each stays until dismissed.
  const key = event.scope === "request" ? `request:${event.reason}` : undefined;
  return addNotice(state, event.scope, trimNoticeText(event), key);
}

// ---------------------------------------------------------------------------------------------
// What the webview draws

/**
 * Actions on a message. Each plugs into the message-action bar; an action that needs a server
 * method shows only when the server has it (`protocolVersion`). Edit and resend, regenerate,
 * fork from here, redact and delete exchange go here once the server has `truncate`,
 * `editMessage`, `fork` and `deleteTurns` (protocol version 2).
 */
export interface MessageAction {
  id: string;
  label: string;
  roles: PanelMessage["role"][];
  /** Lowest server protocol version with the methods the action needs. */
  since: number;
  /** Only on rows with text (not on a bare tool-call carrier). */
  needsText?: boolean;
}

export const MESSAGE_ACTIONS: readonly MessageAction[] = [
  { id: "copy", label: "Copy", roles: ["user", "assistant"], since: 1, needsText: true },
  { id: "edit", label: "Edit", roles: ["user"], since: 2, needsText: true },
  { id: "regenerate", label: "Regenerate", roles: ["assistant"], since: 2 },
  { id: "fork", label: "Fork", roles: ["user", "assistant"], since: 2 },
  { id: "redact", label: "Redact", roles: ["user", "assistant", "tool"], since: 2, needsText: true },
  { id: "deleteExchange", label: "Delete", roles: ["user", "assistant"], since: 2 },
];

export function actionLabel(id: string): string {
  return MESSAGE_ACTIONS.find((a) => a.id === id)?.label ?? id;
}

/** Actions that change nothing: the only ones on a conversation of another workspace (read-only here). */
export const READ_ONLY_ACTIONS: readonly string[] = ["copy"];

export function actionsFor(message: PanelMessage, protocolVersion: number, actions = MESSAGE_ACTIONS, readOnly = false): string[] {
  if (message.id === null || message.streaming) return [];
  return actions
    .filter((a) => a.roles.includes(message.role) && a.since <= protocolVersion && !(a.needsText && message.content === ""))
    .filter((a) => !readOnly || READ_ONLY_ACTIONS.includes(a.id))
    .map((a) => a.id);
}

export interface ToolCallView {
  id: string;
  name: string;
  /** Arguments as readable JSON text. */
  arguments: string;
  /** The tool row's content, or null while there is none. */
  result: string | null;
}

export interface MessageView {
  key: string;
  id: number | null;
  role: PanelMessage["role"];
  content: string;
  streaming: boolean;
  /** Stopped before it was complete; not stored unless `saved`. */
  interrupted: boolean;
  /** Version 4: an interrupted reply stored as far as it got (Continue, Retry or Keep). */
  saved: boolean;
  /** A prompt whose turn failed (Retry is offered in the notice). */
  failed: boolean;
  toolCalls: ToolCallView[];
  actions: string[];
}

export interface MeterView {
  /** e.g. "1,830 / 32,000 tokens" */
  label: string;
  /** 0..1 of the budget (or window), for the bar; null when there is no limit to compare with. */
  fraction: number | null;
  /** e.g. "window 200,000", or "" */
  detail: string;
}

export interface PanelView {
  conversationId: string;
  title: string;
  messages: MessageView[];
  hasMore: boolean;
  loadingOlder: boolean;
  busy: boolean;
  meter: MeterView | null;
  notices: Notice[];
  /** "earlier turns summarized" (with Undo), or null. */
  summary: string | null;
  compacting: boolean;
  search: SearchView | null;
  focusId: number | null;
  /** A conversation of another workspace: the banner's words (the composer is off). Null: this workspace's. */
  elsewhere: string | null;
  /** The header's hint for an imported conversation ("Imported from Claude Code"); null: none. */
  source: string | null;
}

function argumentsText(args: ToolCall["arguments"]): string {
  if (typeof args === "string") {
    try {
      return JSON.stringify(JSON.parse(args), null, 2);
    } catch {
      return args;
    }
  }
  return JSON.stringify(args, null, 2);
}

export function meterView(meter: ContextMeter | null): MeterView | null {
  if (meter === null) return null;
  const n = (x: number) => x.toLocaleString("en-US");
  const limit = meter.budget ?? meter.contextWindow;
  const parts: string[] = [];
  if (meter.contextWindow !== null) parts.push(`window ${n(meter.contextWindow)}`);
  if (meter.providerPromptTokens !== null) {
    const cached = meter.providerCachedTokens;
    parts.push(
      `provider counted ${n(meter.providerPromptTokens)}` + (typeof cached === "number" ? ` (${n(cached)} cached)` : ""),
    );
  }
  if (meter.calibration !== null && meter.calibration.samples > 0) {
    parts.push(`calibrated ×${meter.calibration.factor.toFixed(2)} (${plural(meter.calibration.samples, "sample")})`);
  }
  return {
    label: limit === null ? `${n(meter.estimatedTokens)} tokens` : `${n(meter.estimatedTokens)} / ${n(limit)} tokens`,
    fraction: limit === null || limit <= 0 ? null : Math.min(1, meter.estimatedTokens / limit),
    detail: parts.join(" · "),
  };
}

/**
 * The view: tool rows are folded into the assistant message whose call they answer (shown
 * collapsed there); a tool row whose call is not loaded (an older page) is shown on its own.
 */
export function viewOf(state: PanelState, protocolVersion = 1): PanelView {
  const results = new Map<string, string>();
  const callIds = new Set<string>();
  for (const m of state.messages) {
    if (m.role === "tool" && m.toolCallId !== null) results.set(m.toolCallId, m.content);
    for (const call of m.toolCalls) callIds.add(call.id);
  }
  const messages: MessageView[] = [];
  for (const m of state.messages) {
    if (m.role === "tool" && m.toolCallId !== null && callIds.has(m.toolCallId)) continue;
    messages.push({
      key: m.key,
      id: m.id,
      role: m.role,
      content: m.role === "tool" ? `${m.name ?? "tool"} result:\n${m.content}` : m.content,
      streaming: m.streaming,
      interrupted: m.interrupted === true || m.status === "interrupted",
      saved: m.status === "interrupted",
      failed: m.id !== null && state.retry !== null && m.id === state.retry.promptId,
      toolCalls: m.toolCalls.map((call) => ({
        id: call.id,
        name: call.name,
        arguments: argumentsText(call.arguments),
        result: results.get(call.id) ?? null,
      })),
      actions: actionsFor(m, protocolVersion, MESSAGE_ACTIONS, state.elsewhere !== null),
    });
  }
  return {
    conversationId: state.conversationId,
    title: state.title,
    messages,
    hasMore: state.hasMore,
    loadingOlder: state.loadingOlder,
    busy: state.busy,
    meter: meterView(state.meter),
    notices: cutNotice(state) === null ? state.notices : [...state.notices, cutNotice(state)!],
    summary: summaryText(state.summary),
    compacting: state.compacting,
    search: state.search,
    focusId: state.focusId,
    source: sourceHint(state.source ?? null),
    elsewhere: elsewhereText(state.elsewhere),
  };
}

/** The header's hint for a conversation imported from `source` (a tool's label). */
export function sourceHint(source: string | null): string | null {
  return source === null ? null : `Imported from ${source}`;
}

/** A conversation's title as the list and the panel show it: the server's (client-set or
 * automatic, from the first prompt), else "New chat". The panel keeps no titles of its own. */
export function titleOf(info: { title: string | null } | undefined): string {
  return info?.title ?? "New chat";
}
