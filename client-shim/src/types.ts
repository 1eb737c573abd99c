/**
 * Wire types of the chat history server, protocol version 1 (`shared/spec/protocol.md`).
 *
 * Every shape that crosses the wire lives in this one file. Field names are the wire's
 * (camelCase). Conventions:
 * - In what a client *sends* (params, {@link Message}), optional fields are `?:`.
 * - In what the server *returns*, every field the protocol names is present; fields the protocol
 *   says may be null are typed `T | null`, never optional.
 */

// ---------------------------------------------------------------------------------------------
// JSON

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export interface JsonObject {
  [key: string]: JsonValue;
}

// ---------------------------------------------------------------------------------------------
// Method and notification names

export const Methods = {
  append: "chatHistory/append",
  get: "chatHistory/get",
  format: "chatHistory/format",
  prepare: "chatHistory/prepare",
  saveSummary: "chatHistory/saveSummary",
  getSummary: "chatHistory/getSummary",
  // Version 2: search
  search: "chatHistory/search",
  clear: "chatHistory/clear",
  listConversations: "chatHistory/listConversations",
  // Version 2: conversations and edits
  updateConversation: "chatHistory/updateConversation",
  truncate: "chatHistory/truncate",
  deleteTurns: "chatHistory/deleteTurns",
  editMessage: "chatHistory/editMessage",
  fork: "chatHistory/fork",
  deleteSummary: "chatHistory/deleteSummary",
  // Version 2: calibrated estimates
  reportUsage: "chatHistory/reportUsage",
  // Version 3: workspace identity
  moveWorkspace: "chatHistory/moveWorkspace",
  listWorkspaces: "chatHistory/listWorkspaces",
  // Version 4: replies in flight
  beginReply: "chatHistory/beginReply",
  updateReply: "chatHistory/updateReply",
  endReply: "chatHistory/endReply",
  // Version 4: history from other tools
  importFrom: "chatHistory/importFrom",
} as const;
export type Method = (typeof Methods)[keyof typeof Methods];

/** The settings section the server reads (`workspace/configuration`, `didChangeConfiguration`). */
export const CONFIGURATION_SECTION = "chatHistory";

export const Notifications = {
  trimmed: "chatHistory/trimmed",
  /** Version 3: another process (window, CLI) changed a conversation of this workspace. */
  changed: "chatHistory/changed",
} as const;

/** The protocol version this package speaks (`capabilities.experimental.chatHistory.protocolVersion`). */
export const PROTOCOL_VERSION = 3;

// ---------------------------------------------------------------------------------------------
// Providers

/** The provider kinds the server formats for. */
export const PROVIDER_KINDS = [
  "openai",
  "openai-responses",
  "anthropic",
  "gemini",
  "ollama",
  "mistral",
  "bedrock",
  "cohere",
] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** `providerData`: keyed by provider kind, stored as is, echoed only into that provider's body. */
export type ProviderData = { [K in ProviderKind]?: JsonValue } & { [providerKind: string]: JsonValue | undefined };

// ---------------------------------------------------------------------------------------------
// Messages

export type Role = "system" | "user" | "assistant" | "tool";

export interface ToolCall {
  id: string;
  name: string;
  /** An object, or a JSON string, as the model produced it. */
  arguments: JsonObject | string;
}

interface AttachmentBase {
  kind: "image";
  mimeType?: string;
}
/** An image given inline as base64 `data`. */
export interface DataAttachment extends AttachmentBase {
  data: string;
  uri?: string;
}
/** An image given by `uri` (passed on to providers that accept image URLs; never read by the server). */
export interface UriAttachment extends AttachmentBase {
  uri: string;
  data?: string;
}
export type Attachment = DataAttachment | UriAttachment;

/** Fields every message may carry. */
interface MessageCommon {
  /** On `tool` rows: the tool's name. */
  name?: string | null;
  attachments?: Attachment[];
  /** Epoch milliseconds or an ISO-8601 string; default: now. */
  timestamp?: number | string;
  providerData?: ProviderData;
  /** Any JSON object, stored and returned as is. */
  metadata?: JsonObject;
}

export interface SystemMessage extends MessageCommon {
  role: "system";
  content: string;
}

export interface UserMessage extends MessageCommon {
  role: "user";
  content: string;
}

/** An assistant reply (it may also carry tool calls). */
export interface AssistantReply extends MessageCommon {
  role: "assistant";
  content: string;
  toolCalls?: ToolCall[];
  /** Version 4: a cut reply the client kept itself (only `beginReply` makes a streaming row). */
  status?: "complete" | "interrupted";
}

/** An assistant tool-call carrier: `content` may be omitted or null (stored as `""`). */
export interface AssistantToolCallMessage extends MessageCommon {
  role: "assistant";
  content?: string | null;
  toolCalls: ToolCall[];
}

export type AssistantMessage = AssistantReply | AssistantToolCallMessage;

export interface ToolMessage extends MessageCommon {
  role: "tool";
  content: string;
  /** Required on tool rows: the id of the call this row answers. */
  toolCallId: string;
}

/** A message as a client sends it to `chatHistory/append`. */
export type Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

/** A message as the server returns it: every optional field is filled in. */
export interface StoredMessage {
  /** Increasing in insertion order across the database. */
  id: number;
  /** The conversation's turn number this row belongs to (0: leading system rows / before the first prompt). */
  turn: number;
  /** The row's token estimate. */
  tokens: number;
  role: Role;
  content: string;
  toolCalls: ToolCall[];
  toolCallId: string | null;
  name: string | null;
  attachments: Attachment[];
  /** Always epoch milliseconds. */
  timestamp: number;
  providerData: ProviderData;
  metadata: JsonObject;
  /** Version 4: "streaming" while a reply streams, "interrupted" when it was cut, else "complete". */
  status: MessageStatus;
}

/** Version 4: where a stored row stands (`beginReply` makes "streaming" rows). */
export type MessageStatus = "complete" | "streaming" | "interrupted";

// ---------------------------------------------------------------------------------------------
// Reports and small results

export type StorageTrimReason = "age" | "count" | "tokens";
export type RequestTrimReason = "tokenBudget" | "turnLimit" | "overflowRecovery";
export type TrimReason = StorageTrimReason | RequestTrimReason;

/** What storage retention deleted during one request; `null` in results when nothing was deleted. */
export interface PruneReport {
  droppedMessages: number;
  droppedTurns: number;
  retainedTurns: number;
  reasons: StorageTrimReason[];
}

export interface Summary {
  summary: string;
  /** Epoch milliseconds. */
  updatedAt: number;
  coversThroughId: number | null;
}

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

// ---------------------------------------------------------------------------------------------
// Provider request bodies

type Rows = JsonObject[];

/** OpenAI Chat Completions (and OpenAI-compatible servers). */
export interface OpenAIBody {
  messages: Rows;
}
/** OpenAI Responses API. */
export interface OpenAIResponsesBody {
  /** Omitted when empty. */
  instructions?: string;
  input: Rows;
}
export interface AnthropicBody {
  /** Omitted when empty. */
  system?: string | Rows;
  messages: Rows;
}
export interface GeminiBody {
  /** Omitted when empty. */
  systemInstruction?: JsonObject;
  contents: Rows;
}
/** Ollama `/api/chat`. */
export interface OllamaBody {
  messages: Rows;
}
export interface MistralBody {
  messages: Rows;
}
/** Bedrock Converse. */
export interface BedrockBody {
  /** Omitted when empty. */
  system?: Rows;
  messages: Rows;
}
/** Cohere v2 chat. */
export interface CohereBody {
  messages: Rows;
}

export interface ProviderBodies {
  openai: OpenAIBody;
  "openai-responses": OpenAIResponsesBody;
  anthropic: AnthropicBody;
  gemini: GeminiBody;
  ollama: OllamaBody;
  mistral: MistralBody;
  bedrock: BedrockBody;
  cohere: CohereBody;
}

/** A body of some provider (an alias hides which). */
export type ProviderBody = { [field: string]: JsonValue | undefined };

/** The body type for a `provider` param: exact for a literal kind, generic for an alias. */
export type BodyFor<P> = P extends ProviderKind ? ProviderBodies[P] : ProviderBody;

export interface ProviderRequest<B = ProviderBody> {
  /** Echoes the name the request used (kind or alias). */
  provider: string;
  /** The requested model, else the alias's model, else null. */
  model: string | null;
  /** Exactly the conversation-carrying fields of the provider's request body. */
  body: B;
  /**
   * Version 3: the same for every request of one (workspace, conversation), different between
   * them, and not reversible to either: pass it as OpenAI's `prompt_cache_key` or a gateway's
   * session key.
   */
  cacheKey: string;
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

// ---------------------------------------------------------------------------------------------
// Version 2: compaction and calibrated estimates

/** The calibration of a (provider kind, model): the median of its newest 20 usage ratios. */
export interface Calibration {
  /** 1.0 with no samples. */
  factor: number;
  /** At most 20. */
  samples: number;
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

/** `chatHistory/reportUsage` (no `conversationId`: calibration is per provider kind and model). */
export interface ReportUsageParams {
  /** A provider kind or an alias; default `chatHistory.activeProvider`. */
  provider?: string;
  model?: string;
  /** The `rawEstimatedTokens` of the request that was sent (integer ≥ 1). */
  estimatedTokens: number;
  /** The input tokens the provider reported, cached ones included (integer ≥ 1). */
  promptTokens: number;
}
export type ReportUsageResult = Calibration;

// ---------------------------------------------------------------------------------------------
// Params and results, per method

/** The key every per-conversation method takes. */
export interface ConversationKey {
  /** Non-empty, at most 256 characters. */
  conversationId: string;
  /** Default: the session's workspace identity. */
  workspace?: string;
}

export interface AppendParams extends ConversationKey {
  /** 1 to 1,000 messages, stored atomically. */
  messages: Message[];
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

// Version 2: search

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

export type ClearParams = ConversationKey;
export interface ClearResult {
  deletedMessages: number;
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

// Version 2: conversations and edits

export interface UpdateConversationParams extends ConversationKey {
  /** 1 to 200 code points; null goes back to the automatic title; absent leaves it. */
  title?: string | null;
  /** Replaces the conversation's metadata. */
  metadata?: JsonObject;
}
export type UpdateConversationResult = ConversationInfo;

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

export type DeleteSummaryParams = ConversationKey;
export interface DeleteSummaryResult {
  deleted: boolean;
}

/** `chatHistory/moveWorkspace`: re-keys every conversation of `from` to `to` (one transaction). */
export interface MoveWorkspaceParams {
  from: string;
  to: string;
}
export interface MoveWorkspaceResult {
  /** How many conversations moved. */
  conversations: number;
}

/** `chatHistory/listWorkspaces` takes no params. */
export type ListWorkspacesParams = Record<string, never>;
export interface WorkspaceInfo {
  workspace: string;
  conversations: number;
  lastActivity: number | null;
  /** The folder recorded for it (null: none). */
  folder: string | null;
  /** null when the folder was recorded on another machine. */
  folderExists: boolean | null;
  /** The normalized remote URL of its git repository (null: none known). */
  repository: string | null;
  /**
   * Extension (issue 35 item 5): its conversations that re-keying renamed because their id was
   * taken here, newest first; empty when none. Absent from servers before it.
   */
  renamed?: RenamedConversation[];
}
/** A conversation that re-keying (an old spelling, a moved folder, a link) moved under a new id. */
export interface RenamedConversation {
  /** Its id in this workspace now. */
  conversationId: string;
  /** Its id before. */
  was: string;
  /** The workspace spelling it came from. */
  from: string;
  /** When, in epoch milliseconds. */
  at: number;
}
export interface ListWorkspacesResult {
  workspaces: WorkspaceInfo[];
}

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
}
export interface ImportFromResult {
  conversations: PlannedImport[];
}

/** Params and result type of every request, by method name. */
export interface RequestMap {
  "chatHistory/append": [AppendParams, AppendResult];
  "chatHistory/get": [GetParams, GetResult];
  "chatHistory/format": [FormatParams, FormatResult];
  "chatHistory/prepare": [PrepareParams, PrepareResult];
  "chatHistory/saveSummary": [SaveSummaryParams, SaveSummaryResult];
  "chatHistory/getSummary": [GetSummaryParams, GetSummaryResult];
  "chatHistory/search": [SearchParams, SearchResult];
  "chatHistory/clear": [ClearParams, ClearResult];
  "chatHistory/listConversations": [ListConversationsParams, ListConversationsResult];
  "chatHistory/updateConversation": [UpdateConversationParams, UpdateConversationResult];
  "chatHistory/truncate": [TruncateParams, TruncateResult];
  "chatHistory/deleteTurns": [DeleteTurnsParams, DeleteTurnsResult];
  "chatHistory/editMessage": [EditMessageParams, EditMessageResult];
  "chatHistory/fork": [ForkParams, ForkResult];
  "chatHistory/deleteSummary": [DeleteSummaryParams, DeleteSummaryResult];
  "chatHistory/reportUsage": [ReportUsageParams, ReportUsageResult];
  "chatHistory/moveWorkspace": [MoveWorkspaceParams, MoveWorkspaceResult];
  "chatHistory/listWorkspaces": [ListWorkspacesParams, ListWorkspacesResult];
  "chatHistory/importFrom": [ImportFromParams, ImportFromResult];
}

// ---------------------------------------------------------------------------------------------
// Notification

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
  | "reply";

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
// Settings (`chatHistory` section, nested; settings.schema.json is the source of truth)

export type ContextPreset = "default" | "localModel" | "unbounded";

export interface ProviderAlias {
  provider: ProviderKind;
  model?: string;
  /** The model's context window in tokens (applies only to `model`). */
  contextWindow?: number;
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
  preserveSystemMessages?: boolean;
  maxToolResultChars?: number;
  context?: ChatHistoryContextSettings;
  activeProvider?: string;
  providers?: { [alias: string]: ProviderAlias };
  workspaceIdentity?: WorkspaceIdentity;
}

/** "folder": the (normalized) folder URI; "repository": the git repository and the path in it. */
export type WorkspaceIdentity = "folder" | "repository";

// ---------------------------------------------------------------------------------------------
// Version 4: replies in flight

/** A reply's first fields (`beginReply`'s `message`): the role is always "assistant". */
export interface ReplyMessage {
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
export interface EndReplyParams extends ConversationKey {
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
