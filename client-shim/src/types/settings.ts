/** What a session starts with: `initialize`'s options and the server's capabilities, and the
 * `chatHistory` settings section (nested; settings.schema.json is the source of truth). */

import type { ProviderKind } from "./common";

/** The settings section the server reads (`workspace/configuration`, `didChangeConfiguration`). */
export const CONFIGURATION_SECTION = "chatHistory";

// ---------------------------------------------------------------------------------------------
// initialize

/** `initializationOptions` of `initialize` (every field optional). */
export interface ChatHistoryInitializationOptions {
  /** Folder that holds the database file; created if missing. */
  storagePath?: string;
  /** Initial `chatHistory` settings section, used until the client answers `workspace/configuration`. */
  settings?: ChatHistorySettings;
  /** Explicit workspace identity. */
  workspace?: string;
  /**
   * A PostgreSQL database (libpq connection string or `postgresql://` URI) instead of SQLite in
   * `storagePath`; default `$CHAT_HISTORY_DATABASE_URL`. Never a password (refused): libpq's own
   * sources give it (`PGPASSWORD`, `~/.pgpass`, a service file).
   */
  database?: string;
  /** PostgreSQL: seconds within which deleted text leaves the table and index files (default 600). */
  purgeSeconds?: number;
  /** What names the workspace's history; overrides the `workspaceIdentity` setting. */
  workspaceIdentity?: WorkspaceIdentity;
}

/** `capabilities.experimental.chatHistory` of the initialize result. */
export interface ChatHistoryServerCapabilities {
  protocolVersion: number;
  providers: string[];
}

// ---------------------------------------------------------------------------------------------
// Settings (the `chatHistory` section)

export type ContextPreset = "default" | "localModel" | "unbounded";

export interface ProviderAlias {
  provider: ProviderKind;
  model?: string;
  /** The model's context window in tokens (applies only to `model`). */
  contextWindow?: number;
  /** Version 5: the base URL the client sends to (default: the kind's public API); provider state goes back only there. */
  endpoint?: string;
  /** Version 5: an opaque label of the account, organisation or key (never the key); provider state goes back only within it. */
  stateScope?: string;
}

export type PromptCacheSetting = "auto" | "off";

export interface ChatHistoryContextSettings {
  maxContextTokens?: number | null;
  compactRatio?: number | null;
  historyPruning?: {
    enabled?: boolean;
    maxTokens?: number;
  };
  maxHistoryTurns?: number;
  keepToolContextTurns?: number | null;
  trimLowWater?: number;
  preset?: ContextPreset;
  /** Version 3: cache breakpoints in Anthropic and Bedrock bodies (`"auto"`, the default) or none. */
  promptCache?: PromptCacheSetting;
  /** Compaction proposals of `prepare` (settings.md "Compaction"). */
  compaction?: {
    enabled?: boolean;
    triggerRatio?: number;
    keepRecentTurns?: number;
    maxSummaryTokens?: number;
    prompt?: string | null;
  };
}

/** The `chatHistory` settings section, nested as `workspace/configuration` delivers it. */
export interface ChatHistorySettings {
  enableAutoPruning?: boolean;
  maxAgeHours?: number;
  maxMessages?: number;
  maxTokens?: number;
  /** Version 5: branches kept off a conversation's active path (default 50; 0 keeps none). */
  maxInactiveBranches?: number;
  preserveSystemMessages?: boolean;
  maxToolResultChars?: number;
  context?: ChatHistoryContextSettings;
  activeProvider?: string;
  providers?: { [alias: string]: ProviderAlias };
  workspaceIdentity?: WorkspaceIdentity;
}

/** "folder": the (normalized) folder URI; "repository": the git repository and the path in it. */
export type WorkspaceIdentity = "folder" | "repository";
