/** The conversations family: `chatHistory/listConversations`, `updateConversation` (version 2) and
 * `fork` (version 2), and the conversation record they describe. */

import type { ConversationKey, JsonObject } from "./common";

/** Where a title came from: the client's (`"user"`), the first real prompt (`"auto"`), or none. */
export type TitleSource = "user" | "auto";

/** One conversation as `listConversations`, `updateConversation` and `fork` describe it. */
export interface ConversationInfo {
  conversationId: string;
  workspace: string;
  /** The client's title, else the first real prompt's text (at most 80 code points), else null. */
  title: string | null;
  titleSource: TitleSource | null;
  /** Epoch ms when the server first stored anything for it; null when it does not exist. */
  createdAt: number | null;
  /** Epoch ms of its latest write by a client (retention does not count); null when none. */
  lastActivity: number | null;
  messageCount: number;
  tokens: number;
  hasSummary: boolean;
  metadata: JsonObject;
}

export interface ListConversationsParams {
  workspace?: string;
  /** Every workspace's conversations (then `workspace` is ignored). */
  allWorkspaces?: boolean;
  /** 1 to 1,000 per page; without it, all of them. */
  limit?: number;
  /** A previous page's `nextCursor`. */
  cursor?: string;
}
export interface ListConversationsResult {
  /** Newest activity first, ties by conversationId. */
  conversations: ConversationInfo[];
  /** Pass back as `cursor` for the next page; null when no more remain. */
  nextCursor: string | null;
}

export interface UpdateConversationParams extends ConversationKey {
  /** 1 to 200 code points; null goes back to the automatic title; absent leaves it. */
  title?: string | null;
  /** Replaces the conversation's metadata. */
  metadata?: JsonObject;
}
export type UpdateConversationResult = ConversationInfo;

export interface ForkParams extends ConversationKey {
  /** Must not exist yet (in `newWorkspace`). */
  newConversationId: string;
  /** Copy the rows with ids up to this one (a row of the source); default: all. A row inside a
   * tool exchange copies through the exchange's last answer (version 3). */
  throughId?: number;
  /** Default: the source's workspace. */
  newWorkspace?: string;
}
/** The new conversation. */
export type ForkResult = ConversationInfo;
