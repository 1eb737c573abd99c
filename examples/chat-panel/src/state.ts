/**
 * The chat panel's state and the rules that load it, as pure functions: no `vscode`, no DOM, no
 * I/O. The extension owns one {@link PanelState} and applies these functions (and those of
 * ./stream, ./replies and ./edits) to it as events arrive (pages from `get`, `prepare` results,
 * trim notifications, search answers); ./view turns it into what the webview draws.
 */

import { codePointSpanToUtf16 } from "chat-history-client";
import type { MessageStatus, PreparedRequest, SearchResultItem, Siblings, StoredMessage, ToolCall, TrimmedNotification } from "chat-history-client";
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
  /** Version 5: the row it follows (null: a first row); absent from an older server. */
  parentId?: number | null;
  /** Version 5: its variants (rows with the same parent), for `‹ 2/3 ›`; absent from an older server. */
  siblings?: Siblings;
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
/** The key of the notice that a refused request is being sent once more. */
export const RETRY_NOTICE = "retrying";

/**
 * Version 5: the note while a request the model refused for provider state it sent back (a
 * thinking signature, encrypted reasoning…) is sent once more without it (`reason`: the panel's
 * words for the refusal, with the provider's).
 */
export function providerStateRetryText(reason: string): string {
  return `${reason} — the model refused saved provider state from earlier replies. The chat history server stopped sending it to this model; retrying once without it.`;
}

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

/** A stored row as the panel holds it. */
export function fromStored(row: StoredMessage): PanelMessage {
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
    ...(row.parentId === undefined ? {} : { parentId: row.parentId }),
    ...(row.siblings === undefined ? {} : { siblings: row.siblings }),
  };
}

/**
 * Version 5: the active path after a switch of branch (`switchBranch`'s answer, or the newest
 * page read again after another window switched): it replaces the rows shown (rows not stored go
 * with the branch they belonged to); with `focusId`, the view shows that row.
 */
export function branchShown(state: PanelState, page: { messages: StoredMessage[]; hasMore: boolean }, focusId: number | null = null): PanelState {
  const next = pageLoaded({ ...state, messages: state.messages.filter((m) => m.id !== null) }, page, false);
  return withoutStaleRetry({ ...next, focusId, cutWords: null });
}

/** The newest stored row the panel's state holds (null: none). */
export function newestId(state: PanelState): number | null {
  return newestStoredId(state.messages);
}

/**
 * A click's `expectedLastId`: the newest stored row the person could see when they clicked
 * (`seenId`, sent by the webview from what it had painted), never the state's, which can be a
 * redraw ahead of the screen (another window's turn arrived, not shown yet). Undefined when
 * `seenId` is not a row id (null: an empty chat): what the person saw is not known, so the click
 * acts on nothing.
 */
export function seenLastId(seenId: unknown): number | null | undefined {
  if (seenId === null || (typeof seenId === "number" && Number.isSafeInteger(seenId) && seenId > 0)) return seenId;
  return undefined;
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
export function withoutStaleRetry(state: PanelState): PanelState {
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

export function usageReported(state: PanelState, promptTokens: number, cachedTokens: number | null = null): PanelState {
  if (state.meter === null) return state;
  return { ...state, meter: { ...state.meter, providerPromptTokens: promptTokens, providerCachedTokens: cachedTokens } };
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

/** A conversation's title as the list and the panel show it: the server's (client-set or
 * automatic, from the first prompt), else "New chat". The panel keeps no titles of its own. */
export function titleOf(info: { title: string | null } | undefined): string {
  return info?.title ?? "New chat";
}
