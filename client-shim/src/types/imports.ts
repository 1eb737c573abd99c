/** History from other tools (version 4): `chatHistory/importFrom`, the sources it reads and the
 * sessions it plans or imports. */

import type { PruneReport } from "./common";

/** The tools whose history `chatHistory/importFrom` reads (protocol.md "History from other tools"). */
export const IMPORT_SOURCES = [
  "claude-code",
  "codex",
  "copilot-chat",
  "copilot-cli",
  "gemini-cli",
  "cline",
  "roo-code",
  "continue",
  "opencode",
] as const;
export type ImportSource = (typeof IMPORT_SOURCES)[number];

/**
 * `chatHistory/importFrom` (version 4): another tool's sessions, a dry run unless `dryRun` is
 * false. Without `path`, the tool's own data folder, the sessions it recorded for the session's
 * folder (none there: an empty list).
 */
export interface ImportFromParams {
  source: ImportSource;
  /** Absolute, inside the tool's own data folder on the server's machine. */
  path?: string;
  /** Where every session goes (default: the folder each recorded, as a workspace). */
  workspace?: string;
  /** Default true: read and compare, write nothing. */
  dryRun?: boolean;
}
/** What an import cannot carry over, counted, with why. */
export interface ImportSkipped {
  what: string;
  why: string;
  count: number;
}
/** One session of an import: what it is and what the import does (or would do). */
export interface PlannedImport {
  source: ImportSource;
  sourceId: string;
  conversationId: string;
  workspace: string;
  title: string | null;
  /** The rows read. */
  messages: number;
  /** The rows the import adds (or would add). */
  newMessages: number;
  status: "new" | "updated" | "unchanged";
  skipped: ImportSkipped[];
  /** The earliest row's time (epoch ms; null: none has one). */
  oldest: number | null;
  /** What retention under the session's settings deletes of it at its next read, once imported (null: nothing). */
  retention: PruneReport | null;
  /** Where `workspace` came from: named by the caller, the folder the tool recorded, or (the
   * session records none) the current folder, the window's own. */
  workspaceFrom: "given" | "recorded" | "current";
  /** The conversation of the session's own id that the import did not create (the user's own):
   * left alone, the session imported beside it as `conversationId`. Null: no such. */
  beside: string | null;
}
/** A file an import read no session from, and why: nothing imported never looks like success. */
export interface ImportWarning {
  path: string;
  why: string;
}
export interface ImportFromResult {
  conversations: PlannedImport[];
  warnings: ImportWarning[];
}
