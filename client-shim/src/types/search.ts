/** The search family: `chatHistory/search` (version 2), its params and hits, and the offsets of a
 * hit's highlights as UTF-16. */

import type { Role } from "./common";

/** `chatHistory/search` params: rows of the session's workspace by default. */
export interface SearchParams {
  /** 1 to 1,000 characters. Every word (split at whitespace) must occur in the row, case- and
   * accent-insensitively, as a substring; a part in double quotes must occur as written (its
   * words in order, its spaces). Nothing in it is an operator. */
  query: string;
  /** Only this conversation (in `workspace`, or in every workspace with `allWorkspaces`). */
  conversationId?: string;
  /** Default: the session's workspace identity. */
  workspace?: string;
  /** Search every workspace (`workspace` is then ignored). */
  allWorkspaces?: boolean;
  /** Default `["user", "assistant"]`; `[]` finds nothing. */
  roles?: Role[];
  /** 1 to 200, default 50. */
  limit?: number;
}
export interface SearchResultItem {
  workspace: string;
  conversationId: string;
  /** The row's id (a `get` returns it with every field). */
  id: number;
  turn: number;
  role: Role;
  /** Epoch milliseconds. */
  timestamp: number;
  /** At most 200 code points of the row's content around the first match, as plain text. */
  snippet: string;
  /** `[start, end)` code point offsets (not UTF-16 units) of the matched text in `snippet`. */
  highlights: Array<[number, number]>;
  /** Version 5: whether the row is on its conversation's active path (else `switchBranch` to it). */
  onActivePath: boolean;
}
export interface SearchResult {
  /** Most relevant first, then newest. */
  results: SearchResultItem[];
  /** Whether more rows match than `limit`. */
  hasMore: boolean;
}

/** `[start, end)` code point offsets (as in `highlights`) as UTF-16 offsets into `text`, for
 * `String.prototype.slice` and DOM ranges. */
export function codePointSpanToUtf16(text: string, [start, end]: [number, number]): [number, number] {
  let units = 0;
  let points = 0;
  let from = -1;
  for (const char of text) {
    if (points === start) from = units;
    if (points === end) return [from, units];
    units += char.length;
    points += 1;
  }
  return [from < 0 ? units : from, units];
}
