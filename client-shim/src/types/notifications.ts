/** What the server sends unasked: `chatHistory/trimmed` and (version 3) `chatHistory/changed`. */

import type { RequestTrimReason, StorageTrimReason } from "./common";

export const Notifications = {
  trimmed: "chatHistory/trimmed",
  /** Version 3: another process (window, CLI) changed a conversation of this workspace. */
  changed: "chatHistory/changed",
} as const;

interface TrimmedCommon {
  workspace: string;
  conversationId: string;
  droppedMessages: number;
  droppedTurns: number;
  retainedTurns: number;
  tokensBefore: number;
  tokensAfter: number;
  /** The token budget or cap that applied; null for the age, count and turn-limit reasons. */
  budget: number | null;
}
/** Storage retention deleted rows for good (one notification per reason). */
export interface StorageTrimmedNotification extends TrimmedCommon {
  scope: "storage";
  reason: StorageTrimReason;
}
/** A `prepare` dropped turns from the request (stored rows are untouched). */
export interface RequestTrimmedNotification extends TrimmedCommon {
  scope: "request";
  reason: RequestTrimReason;
}
/** `chatHistory/trimmed` params. */
export type TrimmedNotification = StorageTrimmedNotification | RequestTrimmedNotification;

/** Why a conversation changed (one notification may stand for several changes: the most telling). */
export type ChangeReason =
  | "append"
  | "edit"
  | "delete"
  | "summary"
  | "retention"
  | "title"
  | "clear"
  /** Version 4: a reply streams (at most twice a second per conversation), ended or was interrupted. */
  | "reply"
  /** Version 5: another window changed the active path other than at its end (a branch switch, a
   * new branch, a subtree truncated): read the conversation again. */
  | "branch";

/**
 * `chatHistory/changed` params (version 3): another process changed a conversation of this
 * session's workspace; never sent for this client's own requests.
 */
export interface ChangedNotification {
  workspace: string;
  conversationId: string;
  /** The conversation's newest row id now (null: it has none). */
  lastId: number | null;
  reason: ChangeReason;
}
