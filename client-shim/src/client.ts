/**
 * `ChatHistoryClient`: typed methods over any JSON-RPC connection that can send requests and
 * receive notifications — a vscode-languageclient `LanguageClient`, a vscode-jsonrpc
 * `MessageConnection`, or a test double. This module imports neither `vscode` nor Node APIs.
 */

import {
  Methods,
  Notifications,
  type AppendParams,
  type AppendResult,
  type BodyFor,
  type ClearParams,
  type ClearResult,
  type FormatParams,
  type GetParams,
  type GetResult,
  type GetSummaryParams,
  type ListConversationsParams,
  type ListConversationsResult,
  type PreparedRequest,
  type PrepareParams,
  type ProviderRequest,
  type ListWorkspacesResult,
  type MoveWorkspaceParams,
  type ImportFromParams,
  type ImportFromResult,
  type MoveWorkspaceResult,
  type ReportUsageParams,
  type ReportUsageResult,
  type SaveSummaryParams,
  type SearchParams,
  type SearchResult,
  type Summary,
  type TrimmedNotification,
  type ChangedNotification,
  // Version 2: conversations and edits
  type DeleteSummaryParams,
  type DeleteSummaryResult,
  type DeleteTurnsParams,
  type DeleteTurnsResult,
  type EditMessageParams,
  type EditMessageResult,
  type ForkParams,
  type ForkResult,
  type TruncateParams,
  type TruncateResult,
  type UpdateConversationParams,
  type UpdateConversationResult,
  // Version 4: replies in flight
  type BeginReplyParams,
  type BeginReplyResult,
  type EndReplyParams,
  type EndReplyResult,
  type UpdateReplyParams,
  type UpdateReplyResult,
  // Version 5: provider state
  type ReportProviderErrorParams,
  type ReportProviderErrorResult,
  type SaveCompactionParams,
  type SaveCompactionResult,
  // Version 5: conversation trees
  type GetTreeParams,
  type GetTreeResult,
  type SwitchBranchParams,
  type SwitchBranchResult,
} from "./types";

export interface Disposable {
  dispose(): void;
}

/** The little a client needs from a JSON-RPC connection. `LanguageClient` and `MessageConnection` both fit. */
export interface RpcConnection {
  sendRequest<R>(method: string, param?: any): Promise<R>;
  onNotification(method: string, handler: (params: any) => void): Disposable;
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Error codes the client distinguishes. */
export const ErrorCodes = {
  /** JSON-RPC: a malformed or out-of-range param; `data.field` names it. */
  InvalidParams: -32602,
  /** JSON-RPC: unknown method. */
  MethodNotFound: -32601,
  /** JSON-RPC: an unexpected server failure. */
  InternalError: -32603,
  /** LSP: a request before `initialize`. */
  ServerNotInitialized: -32002,
  /** The prepared request does not fit the model's known context window. */
  ContextOverflow: 1001,
  /** The database cannot be opened or written. */
  StorageError: 1002,
  /** Version 3: a rewind's `expectedLastId` is not the conversation's newest row; nothing changed. */
  ConversationChanged: 1003,
  /** Version 4: the conversation already has a streaming reply (`data.id`); nothing changed. */
  ReplyInProgress: 1004,
  /** vscode-jsonrpc: the message could not be written (e.g. the server's stdin is closed). */
  MessageWriteError: -32099,
  /** vscode-jsonrpc: the server's output could not be read. */
  MessageReadError: -32098,
  /** vscode-jsonrpc: a pending request was rejected because the connection was disposed. */
  PendingResponseRejected: -32097,
  /** vscode-jsonrpc / vscode-languageclient: the connection is not (or no longer) running. */
  ConnectionInactive: -32096,
} as const;

export interface ChatHistoryErrorOptions {
  /** The request method that failed, when known. */
  method?: string;
  cause?: unknown;
}

/** Base class of every error a {@link ChatHistoryClient} method rejects with for a failed request. */
export class ChatHistoryError extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;
  /** The error's `data` as the server sent it. */
  readonly data: unknown;
  /** The request method that failed, when known. */
  readonly method: string | undefined;

  constructor(message: string, code: number, data?: unknown, options: ChatHistoryErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.data = data;
    this.method = options.method;
  }
}

/** -32602: a malformed or out-of-range param. */
export class InvalidParamsError extends ChatHistoryError {
  static readonly code = ErrorCodes.InvalidParams;
  /** The offending field's path, e.g. `messages[3].toolCallId` (from `data.field`). */
  readonly field: string | undefined;

  constructor(message: string, data?: unknown, options?: ChatHistoryErrorOptions) {
    super(message, ErrorCodes.InvalidParams, data, options);
    const field = dataField(data, "field");
    this.field = typeof field === "string" ? field : undefined;
  }
}

/** -32002: a request reached the server before `initialize`. */
export class ServerNotInitializedError extends ChatHistoryError {
  static readonly code = ErrorCodes.ServerNotInitialized;

  constructor(message: string, data?: unknown, options?: ChatHistoryErrorOptions) {
    super(message, ErrorCodes.ServerNotInitialized, data, options);
  }
}

/** 1001: the prepared request does not fit the model's known context window, even after trimming. */
export class ContextOverflowError extends ChatHistoryError {
  static readonly code = ErrorCodes.ContextOverflow;
  /** The request's token estimate after trimming (NaN if the server did not say). */
  readonly estimatedTokens: number;
  /** The model's context window (NaN if the server did not say). */
  readonly contextWindow: number;

  constructor(message: string, data?: unknown, options?: ChatHistoryErrorOptions) {
    super(message, ErrorCodes.ContextOverflow, data, options);
    this.estimatedTokens = numberOrNaN(dataField(data, "estimatedTokens"));
    this.contextWindow = numberOrNaN(dataField(data, "contextWindow"));
  }
}

/** 1002: the database cannot be opened or written. */
export class StorageError extends ChatHistoryError {
  static readonly code = ErrorCodes.StorageError;
  /** Why, as the server put it (`data.reason`, else the message). */
  readonly reason: string;

  constructor(message: string, data?: unknown, options?: ChatHistoryErrorOptions) {
    super(message, ErrorCodes.StorageError, data, options);
    const reason = dataField(data, "reason");
    this.reason = typeof reason === "string" ? reason : message;
  }
}

/**
 * 1003 (version 3): another window or process wrote to the conversation since the client read it
 * (its `expectedLastId` is stale). Nothing was changed: reload the conversation and let the
 * user decide again.
 */
export class ConversationChangedError extends ChatHistoryError {
  static readonly code = ErrorCodes.ConversationChanged;
  /** The conversation's newest row id now (null: it has none; undefined if the server did not say). */
  readonly lastId: number | null | undefined;

  constructor(message: string, data?: unknown, options?: ChatHistoryErrorOptions) {
    super(message, ErrorCodes.ConversationChanged, data, options);
    const lastId = dataField(data, "lastId");
    this.lastId = typeof lastId === "number" || lastId === null ? lastId : undefined;
  }
}

/**
 * 1004 (version 4): `beginReply` on a conversation whose reply is still streaming (in this
 * window or another). Nothing changed; `id` is the streaming row.
 */
export class ReplyInProgressError extends ChatHistoryError {
  static readonly code = ErrorCodes.ReplyInProgress;
  /** The streaming row's id (undefined if the server did not say). */
  readonly id: number | undefined;

  constructor(message: string, data?: unknown, options?: ChatHistoryErrorOptions) {
    super(message, ErrorCodes.ReplyInProgress, data, options);
    const id = dataField(data, "id");
    this.id = typeof id === "number" ? id : undefined;
  }
}

export interface ConnectionClosedDetails {
  /** The server process's exit code, when it is known to have exited. */
  exitCode?: number | null;
  /** The signal that ended the server process, if any. */
  signal?: string | null;
}

/**
 * The connection to the server is gone (the process exited or the connection was disposed) or
 * not running: the request got no answer. `code` is vscode-jsonrpc's -32099 (write failed),
 * -32098 (read failed), -32097 (pending request rejected) or -32096 (connection inactive).
 */
export class ConnectionClosedError extends ChatHistoryError {
  readonly exitCode: number | null;
  readonly signal: string | null;

  constructor(
    message: string,
    code: number = ErrorCodes.PendingResponseRejected,
    details: ConnectionClosedDetails = {},
    options?: ChatHistoryErrorOptions,
  ) {
    super(message, code, undefined, options);
    this.exitCode = details.exitCode ?? null;
    this.signal = details.signal ?? null;
  }
}

/**
 * Turns a rejection of `sendRequest` into the matching {@link ChatHistoryError} subclass, by
 * error code (duck-typed, so that a `ResponseError` from any copy of vscode-jsonrpc maps).
 * Errors without a numeric `code` are not from the server or the connection and are returned
 * unchanged.
 */
export function toChatHistoryError(error: unknown, method?: string): unknown {
  if (error instanceof ChatHistoryError) return error;
  if (typeof error !== "object" || error === null) return error;
  const { code, message, data } = error as { code?: unknown; message?: unknown; data?: unknown };
  if (typeof code !== "number") return error;
  const text = typeof message === "string" && message !== "" ? message : `request failed with code ${code}`;
  const options: ChatHistoryErrorOptions = { method, cause: error };
  switch (code) {
    case ErrorCodes.InvalidParams:
      return new InvalidParamsError(text, data, options);
    case ErrorCodes.ServerNotInitialized:
      return new ServerNotInitializedError(text, data, options);
    case ErrorCodes.ContextOverflow:
      return new ContextOverflowError(text, data, options);
    case ErrorCodes.StorageError:
      return new StorageError(text, data, options);
    case ErrorCodes.ConversationChanged:
      return new ConversationChangedError(text, data, options);
    case ErrorCodes.ReplyInProgress:
      return new ReplyInProgressError(text, data, options);
    case ErrorCodes.MessageWriteError:
    case ErrorCodes.MessageReadError:
    case ErrorCodes.PendingResponseRejected:
    case ErrorCodes.ConnectionInactive:
      return new ConnectionClosedError(text, code, {}, options);
    default:
      return new ChatHistoryError(text, code, data, options);
  }
}

function dataField(data: unknown, key: string): unknown {
  return typeof data === "object" && data !== null ? (data as Record<string, unknown>)[key] : undefined;
}

function numberOrNaN(value: unknown): number {
  return typeof value === "number" ? value : Number.NaN;
}

// ---------------------------------------------------------------------------------------------
// Client

export type TrimmedListener = (event: TrimmedNotification) => void;
export type ChangedListener = (event: ChangedNotification) => void;

/** One notification's listeners: a vscode-jsonrpc connection keeps one handler per method, so
 * the first listener registers it and every listener hears each notification. */
class Fanout<E> {
  private readonly listeners = new Set<(event: E) => void>();
  private registration: Disposable | undefined;

  constructor(
    private readonly connection: RpcConnection,
    private readonly method: string,
  ) {}

  add(listener: (event: E) => void): Disposable {
    this.listeners.add(listener);
    this.registration ??= this.connection.onNotification(this.method, (params) => {
      for (const each of [...this.listeners]) {
        try {
          each(params as E);
        } catch {
          // One listener's failure must not starve the others.
        }
      }
    });
    return {
      dispose: () => {
        this.listeners.delete(listener);
        if (this.listeners.size === 0) this.clear();
      },
    };
  }

  clear(): void {
    this.listeners.clear();
    const registration = this.registration;
    this.registration = undefined;
    registration?.dispose();
  }
}

/** Typed access to the chat history server's methods and its notifications. */
export class ChatHistoryClient implements Disposable {
  private readonly trimmed: Fanout<TrimmedNotification>;
  private readonly changed: Fanout<ChangedNotification>;

  constructor(readonly connection: RpcConnection) {
    this.trimmed = new Fanout(connection, Notifications.trimmed);
    this.changed = new Fanout(connection, Notifications.changed);
  }

  /** Appends 1 to 1,000 messages atomically; answers one stored row per message, in order. */
  append(params: AppendParams): Promise<AppendResult> {
    return this.request(Methods.append, params);
  }

  /** The (pruned) history; with `limit`, the newest page (older than `beforeId`) and `hasMore`. */
  get(params: GetParams): Promise<GetResult> {
    return this.request(Methods.get, params);
  }

  /** The whole history formatted for a provider (kind or alias), without trimming. */
  format<P extends string = string>(params: FormatParams<P>): Promise<ProviderRequest<BodyFor<P>>> {
    return this.request(Methods.format, params);
  }

  /** A provider request built under the budget, turn limit and tool-context bound. */
  prepare<P extends string = string>(params: PrepareParams<P>): Promise<PreparedRequest<BodyFor<P>>> {
    return this.request(Methods.prepare, params);
  }

  saveSummary(params: SaveSummaryParams): Promise<Summary> {
    return this.request(Methods.saveSummary, params);
  }

  getSummary(params: GetSummaryParams): Promise<Summary | null> {
    return this.request(Methods.getSummary, params);
  }

  /** Full-text search over stored rows (version 2): most relevant first, with snippets and
   * code-point highlights; retention runs first, so only rows a `get` would return are found. */
  search(params: SearchParams): Promise<SearchResult> {
    return this.request(Methods.search, params);
  }

  /** Deletes the conversation's messages and summary. */
  clear(params: ClearParams): Promise<ClearResult> {
    return this.request(Methods.clear, params);
  }

  /** The workspace's (or every workspace's) conversations, newest activity first, paged by `limit`/`cursor`. */
  listConversations(params: ListConversationsParams = {}): Promise<ListConversationsResult> {
    return this.request(Methods.listConversations, params);
  }

  // Version 2: conversations and edits

  /** Sets the title (null: back to the automatic one) and/or replaces the metadata. */
  updateConversation(params: UpdateConversationParams): Promise<UpdateConversationResult> {
    return this.request(Methods.updateConversation, params);
  }

  /** Deletes row `fromId` and every later row (version 5: its subtree; edit and resend and
   * regenerate make branches there instead); with `expectedLastId`, only while that is still the
   * newest row (the active leaf) (else `ConversationChangedError`). */
  truncate(params: TruncateParams): Promise<TruncateResult> {
    return this.request(Methods.truncate, params);
  }

  /** Deletes every row of the named turns; turn numbers never change (`expectedLastId` as `truncate`). */
  deleteTurns(params: DeleteTurnsParams): Promise<DeleteTurnsResult> {
    return this.request(Methods.deleteTurns, params);
  }

  /** Replaces a row's content, attachments and/or metadata in place (`expectedLastId` as `truncate`). */
  editMessage(params: EditMessageParams): Promise<EditMessageResult> {
    return this.request(Methods.editMessage, params);
  }

  /** Copies the conversation (through `throughId`) into a new one. */
  fork(params: ForkParams): Promise<ForkResult> {
    return this.request(Methods.fork, params);
  }

  /** Deletes the conversation's summary; `deleted` says whether there was one. */
  deleteSummary(params: DeleteSummaryParams): Promise<DeleteSummaryResult> {
    return this.request(Methods.deleteSummary, params);
  }

  /**
   * Reports a provider's prompt token count for a sent request (`estimatedTokens` is its
   * `rawEstimatedTokens`); answers the new calibration of that provider kind and model.
   */
  reportUsage(params: ReportUsageParams): Promise<ReportUsageResult> {
    return this.request(Methods.reportUsage, params);
  }

  /** Re-keys every conversation of `from` to `to` (a conversation id in both: -32602 `to`). */
  moveWorkspace(params: MoveWorkspaceParams): Promise<MoveWorkspaceResult> {
    return this.request(Methods.moveWorkspace, params);
  }

  /** Every workspace with conversations, newest activity first. */
  listWorkspaces(): Promise<ListWorkspacesResult> {
    return this.request(Methods.listWorkspaces, {});
  }

  /**
   * Another tool's history (version 4): a dry run unless `dryRun` is false; one entry per
   * session, with what retention deletes of it at the next read.
   */
  importFrom(params: ImportFromParams): Promise<ImportFromResult> {
    return this.request(Methods.importFrom, params);
  }

  // Version 4: replies in flight (see also `streamReply` in ./replies)

  /** Stores a streaming assistant row (or makes the interrupted newest row `continueId` stream
   * again); a conversation already streaming rejects with `ReplyInProgressError`. */
  beginReply(params: BeginReplyParams): Promise<BeginReplyResult> {
    return this.request(Methods.beginReply, params);
  }

  /** Appends `contentDelta` (or replaces `content`) of a streaming row; committed when answered. */
  updateReply(params: UpdateReplyParams): Promise<UpdateReplyResult> {
    return this.request(Methods.updateReply, params);
  }

  /** Ends a streaming row: "complete" or "interrupted" (estimated, indexed, retention as an
   * append), or "discard" (deleted for good; `message` null). */
  endReply(params: EndReplyParams): Promise<EndReplyResult> {
    return this.request(Methods.endReply, params);
  }

  // Version 5: provider state that stays valid

  /** Stores what a provider's own compaction returned for the rows through `coversThroughId`:
   * `prepare` sends the items in their place only to the origin that minted them. */
  saveCompaction(params: SaveCompactionParams): Promise<SaveCompactionResult> {
    return this.request(Methods.saveCompaction, params);
  }

  /**
   * Reports a provider's error answer to a request of this conversation. When it refused
   * provider state (a thinking signature, encrypted content, a thought signature, a compaction
   * item), the server fences that state from the target, so that one new `prepare` succeeds;
   * any other error fences nothing (`reason` null). The error text is never stored or echoed.
   */
  reportProviderError(params: ReportProviderErrorParams): Promise<ReportProviderErrorResult> {
    return this.request(Methods.reportProviderError, params);
  }

  // Version 5: conversation trees

  /**
   * Makes the path through row `id` the active path (the branch a panel's `‹ 2/3 ›` picks) and
   * answers it (its newest `limit` rows); with `expectedLastId`, only while that is still the
   * active leaf (else `ConversationChangedError`); a reply streaming in the conversation is
   * `ReplyInProgressError`. Other windows hear of it as `changed` reason "branch".
   */
  switchBranch(params: SwitchBranchParams): Promise<SwitchBranchResult> {
    return this.request(Methods.switchBranch, params);
  }

  /** A page of every branch's rows (id order), for a tree view. */
  getTree(params: GetTreeParams): Promise<GetTreeResult> {
    return this.request(Methods.getTree, params);
  }

  /** Subscribes to `chatHistory/trimmed` (storage retention deleted rows, or `prepare` dropped turns). */
  onTrimmed(listener: TrimmedListener): Disposable {
    return this.trimmed.add(listener);
  }

  /**
   * Subscribes to `chatHistory/changed` (version 3): another window or process changed a
   * conversation of this workspace (within 2 s while the server is idle). Refresh what shows it;
   * `reason` "append" means rows were added after what you had, anything else calls for a reload.
   */
  onChanged(listener: ChangedListener): Disposable {
    return this.changed.add(listener);
  }

  /** Drops every listener; the connection itself is left as it is. */
  dispose(): void {
    this.trimmed.clear();
    this.changed.clear();
  }

  private async request<R>(method: string, params: object): Promise<R> {
    try {
      return await this.connection.sendRequest<R>(method, params);
    } catch (error) {
      throw toChatHistoryError(error, method);
    }
  }
}
