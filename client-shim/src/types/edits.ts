/** The edits family (version 2): `chatHistory/truncate`, `deleteTurns` and `editMessage`, each
 * guarded by `expectedLastId` (version 3). */

import type { Attachment, ConversationKey, JsonObject, StoredMessage } from "./common";

/**
 * Version 3: the newest row id the client has seen (null: it saw an empty conversation). When the
 * conversation's newest row is another one, the rewind changes nothing and rejects with
 * `ConversationChangedError` (1003). Omit it to rewind whatever the conversation now holds.
 */
export interface ExpectedLastId {
  expectedLastId?: number | null;
}

export interface TruncateParams extends ConversationKey, ExpectedLastId {
  /** This row and every later row of the conversation are deleted. */
  fromId: number;
}
export interface TruncateResult {
  deletedMessages: number;
  /** A summary covering a deleted row went with it. */
  summaryDeleted: boolean;
}

export interface DeleteTurnsParams extends ConversationKey, ExpectedLastId {
  /** 1 to 1,000 turn numbers, none negative (0: rows before the first real prompt). */
  turns: number[];
}
export interface DeleteTurnsResult {
  deletedMessages: number;
  deletedTurns: number;
}

export interface EditMessageParams extends ConversationKey, ExpectedLastId {
  id: number;
  content?: string;
  attachments?: Attachment[];
  metadata?: JsonObject;
}
/** The row as now stored. */
export type EditMessageResult = StoredMessage;
