/**
 * What the webview draws, computed from the panel's state ({@link viewOf}): messages with their
 * actions and folded tool rows, the meter, the banners; and a conversation as Markdown (Export).
 * Pure functions: no `vscode`, no DOM, no I/O.
 */

import type { StoredMessage, ToolCall } from "chat-history-client";
import { cutNotice } from "./replies";
import { newestId, plural, type ContextMeter, type Elsewhere, type Notice, type PanelMessage, type PanelState, type SearchView, type SummaryBanner } from "./state";

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
  /** Version 5: the row's variants, drawn `‹ 2/3 ›`; null when it has none (or the server has no trees). */
  branch: BranchView | null;
}

/** `‹ index/count ›` of a row with siblings: the arrows switch to the previous or next one. */
export interface BranchView {
  /** 1-based, as shown. */
  index: number;
  count: number;
  /** The sibling the ‹ arrow switches to (null: this is the first). */
  prev: number | null;
  /** The sibling the › arrow switches to (null: this is the last). */
  next: number | null;
}

/** The branch arrows of a row (version 5): on a stored, settled row with siblings. */
export function branchOf(message: PanelMessage, protocolVersion: number): BranchView | null {
  const siblings = message.siblings;
  if (protocolVersion < 5 || siblings === undefined || siblings.count < 2 || message.id === null || message.streaming) return null;
  const at = siblings.ids.indexOf(message.id);
  const index = at < 0 ? siblings.index : at;
  return {
    index: index + 1,
    count: siblings.count,
    prev: index > 0 ? (siblings.ids[index - 1] ?? null) : null,
    next: index < siblings.ids.length - 1 ? (siblings.ids[index + 1] ?? null) : null,
  };
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
  /**
   * The newest stored row this view draws (tool results folded into their call included): what
   * a click on it expects to be the conversation's last row. Null: none stored.
   */
  lastId: number | null;
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
      branch: state.elsewhere !== null ? null : branchOf(m, protocolVersion),
    });
  }
  return {
    conversationId: state.conversationId,
    title: state.title,
    messages,
    lastId: newestId(state),
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

/** The text of the banner, or null when there is none. */
export function summaryText(summary: SummaryBanner | null): string | null {
  if (summary === null) return null;
  const turns = summary.turns === null ? "Earlier turns" : plural(summary.turns, "earlier turn");
  return `${turns} summarized: the model gets the summary instead of them (they stay in the history).`;
}

/** The banner over a conversation of another workspace: why it is read-only and what can be done. */
export function elsewhereText(elsewhere: Elsewhere | null): string | null {
  if (elsewhere === null) return null;
  return `This chat belongs to the workspace "${elsewhere.name}" and is read-only here. To reply, continue it in this workspace (a copy; the original stays there) or move that workspace's history here.`;
}

/** The header's hint for a conversation imported from `source` (a tool's label). */
export function sourceHint(source: string | null): string | null {
  return source === null ? null : `Imported from ${source}`;
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
