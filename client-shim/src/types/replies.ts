/** Replies in flight (version 4): `chatHistory/beginReply`, `updateReply` and `endReply`. */

import type { ConversationKey, JsonObject, ProviderData, PruneReport, StoredMessage, ToolCall } from "./common";
import type { OriginFields } from "./provider_state";

/** A reply's first fields (`beginReply`'s `message`): the role is always "assistant". */
export interface ReplyMessage extends OriginFields {
  content?: string;
  toolCalls?: ToolCall[];
  providerData?: ProviderData;
  metadata?: JsonObject;
}

export interface BeginReplyParams extends ConversationKey {
  /** As for a rewind: the newest row the client saw (1003 when stale). */
  expectedLastId?: number | null;
  /** The conversation's newest row, an interrupted reply: it streams again, continued in place. */
  continueId?: number;
  /**
   * Version 5: the row the reply follows (absent: the active leaf). Regenerate is `parentId` =
   * the prompt: a sibling of the replies it had, none deleted. Never with `continueId`.
   */
  parentId?: number | null;
  message?: ReplyMessage;
}
/** The streaming row (`status` "streaming"). */
export type BeginReplyResult = StoredMessage;

export interface UpdateReplyParams extends ConversationKey {
  id: number;
  /** Appended to the text (never with `content`). */
  contentDelta?: string;
  /** Replaces the text. */
  content?: string;
  /** Replace the row's tool calls / providerData. */
  toolCalls?: ToolCall[];
  providerData?: ProviderData;
}
export interface UpdateReplyResult {
  id: number;
  /** The text's length in code points. */
  length: number;
}

export type EndReplyStatus = "complete" | "interrupted" | "discard";
export interface EndReplyParams extends ConversationKey, OriginFields {
  id: number;
  status: EndReplyStatus;
  content?: string;
  toolCalls?: ToolCall[];
  providerData?: ProviderData;
  metadata?: JsonObject;
}
export interface EndReplyResult {
  /** The row as stored; null when discarded. */
  message: StoredMessage | null;
  pruned: PruneReport | null;
}
