/**
 * The history family: `chatHistory/append`, `get`, `clear`, `format`, `prepare`, `getSummary`,
 * `saveSummary` and `deleteSummary` — their params and results (the prepared request, its
 * compaction proposal, the summary).
 */

import type { ConversationKey, JsonObject, Message, PruneReport, RequestTrimReason, StoredMessage } from "./common";
import type { ProviderBody, ProviderRequest } from "./providers";
import type { Calibration } from "./usage";

export interface Summary {
  summary: string;
  /** Epoch milliseconds. */
  updatedAt: number;
  coversThroughId: number | null;
}

/** `trimmed` of a {@link PreparedRequest}: totals over the steps that dropped turns. */
export interface RequestTrim {
  droppedMessages: number;
  droppedTurns: number;
  retainedTurns: number;
  /** The last step that dropped turns. */
  reason: RequestTrimReason;
  tokensBefore: number;
  tokensAfter: number;
}

export interface PreparedRequest<B = ProviderBody> extends ProviderRequest<B> {
  estimatedTokens: number;
  /** null when proactive trimming is off. */
  budget: number | null;
  /** null when the model's capacity is unknown. */
  contextWindow: number | null;
  trimmed: RequestTrim | null;
  collapsedToolRows: number;
  collapsedTurns: number;
  // Version 2: compaction and calibrated estimates
  /** A proposal to compact older turns, or null (see {@link CompactionProposal}). */
  compaction: CompactionProposal<B> | null;
  /** Turns the saved summary stood in for in this request. */
  compactedTurns: number;
  /** Stored rows (other than system rows) of those turns. */
  compactedMessages: number;
  /** The estimate before calibration: report it back with `reportUsage`. */
  rawEstimatedTokens: number;
  /** The factor `estimatedTokens` and every other token figure were calibrated with. */
  calibration: Calibration;
  /**
   * Version 4, with `continueId`: the trailing whitespace cut from the reply so that the
   * provider accepts it as a prefill (Anthropic, Bedrock), "" when nothing was cut; put it back
   * before the continuation's first characters. null without `continueId`.
   */
  continueTrimmed: string | null;
}

/**
 * `PreparedRequest.compaction`: send `request.body` to the model (merging your own model and
 * sampling fields) and save its reply with `saveSummary({summary, coversThroughId: throughId})`.
 */
export interface CompactionProposal<B = ProviderBody> {
  /** The newest row the summary will cover. */
  throughId: number;
  /** Turns the summary will stand in for, counting those the current summary covers. */
  coveredTurns: number;
  /** The compaction request's estimate, calibrated. */
  estimatedTokens: number;
  /** The same, uncalibrated. */
  rawEstimatedTokens: number;
  /** For the same provider and model as the `prepare`. */
  request: ProviderRequest<B>;
}

export interface AppendParams extends ConversationKey {
  /** 1 to 1,000 messages, stored atomically. */
  messages: Message[];
  /**
   * Version 5: the row the first new message follows (absent: the active leaf; null: a new first
   * row). A row that is not the active leaf starts a new branch there (Edit & resend: the edited
   * prompt's parent); the last new row becomes the active leaf. Nothing is deleted.
   */
  parentId?: number | null;
}
export interface AppendResult {
  /** One per request message, in order (including rows retention deleted in the same request). */
  messages: StoredMessage[];
  pruned: PruneReport | null;
}

export interface GetParams extends ConversationKey {
  /** 1 to 10,000: the newest `limit` rows. */
  limit?: number;
  /** Only rows older than this id. */
  beforeId?: number;
}
export interface GetResult {
  messages: StoredMessage[];
  summary: Summary | null;
  pruned: PruneReport | null;
  /** Whether older rows exist. */
  hasMore: boolean;
}

export interface ToolSchema {
  name: string;
  description?: string;
  /** A JSON Schema object. */
  parameters?: JsonObject;
}

export interface FormatParams<P extends string = string> extends ConversationKey {
  /** A provider kind or an alias; default `chatHistory.activeProvider`. */
  provider?: P;
  model?: string;
  tools?: ToolSchema[];
}
export type FormatResult<B = ProviderBody> = ProviderRequest<B>;

export interface PrepareParams<P extends string = string> extends FormatParams<P> {
  extraTokens?: number;
  /** Set after a provider reported a context overflow. */
  overflowRecovery?: boolean;
  keepToolContextTurns?: number;
  /** Version 4: the conversation's newest row, an interrupted reply, that the body continues. */
  continueId?: number;
}
export type PrepareResult<B = ProviderBody> = PreparedRequest<B>;

export interface SaveSummaryParams extends ConversationKey {
  summary: string;
  coversThroughId?: number;
}
export type SaveSummaryResult = Summary;

export type GetSummaryParams = ConversationKey;
export type GetSummaryResult = Summary | null;

export type ClearParams = ConversationKey;
export interface ClearResult {
  deletedMessages: number;
}

export type DeleteSummaryParams = ConversationKey;
export interface DeleteSummaryResult {
  deleted: boolean;
}
