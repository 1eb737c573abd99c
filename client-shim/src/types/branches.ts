/**
 * The branches family (version 5, conversation trees): `chatHistory/switchBranch` and
 * `chatHistory/getTree`. Every read of versions 1–4 reads the active path (the rows from a first
 * row to the active leaf); these two move and show the rest of the tree.
 */

import type { ConversationKey, Role, StoredMessage } from "./common";
import type { ExpectedLastId } from "./edits";

export interface SwitchBranchParams extends ConversationKey, ExpectedLastId {
  /**
   * A row of the conversation: its path becomes the active path. From it, at each row with
   * several children, the child whose subtree holds the leaf active most recently (else the
   * newest child), down to a leaf. A row of the active path leaves it as it is.
   * `expectedLastId` names the active leaf the client saw (1003 when stale); a reply streaming
   * in the conversation is 1004.
   */
  id: number;
  /** 1 to 10,000: answer only the newest `limit` rows of the new active path (as `get`'s). */
  limit?: number;
}
export interface SwitchBranchResult {
  activeLeafId: number;
  /** The new active path (its newest `limit` rows), oldest first, each with `siblings`. */
  messages: StoredMessage[];
  /** Whether older rows of the path exist beyond `messages`. */
  hasMore: boolean;
}

export interface GetTreeParams extends ConversationKey {
  /** Only rows with a greater id (a page's last id). */
  afterId?: number;
  /** 1 to 10,000, default 1,000. */
  limit?: number;
}
/** One row of the tree, for a tree view. */
export interface TreeNode {
  id: number;
  parentId: number | null;
  role: Role;
  /** The first 80 code points of its content. */
  preview: string;
  /** Epoch milliseconds. */
  timestamp: number;
  /** How many rows follow it. */
  children: number;
  /** Whether it is on the active path. */
  active: boolean;
}
export interface GetTreeResult {
  /** Every branch's rows, in id order. */
  nodes: TreeNode[];
  activeLeafId: number | null;
  hasMore: boolean;
}
