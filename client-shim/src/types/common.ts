/**
 * What every family of the wire shares: JSON, the provider kinds, messages as a client sends them
 * and as the server returns them, retention's report and the key of a conversation.
 */

import type { Origin, OriginFields } from "./provider_state";

// ---------------------------------------------------------------------------------------------
// JSON

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export interface JsonObject {
  [key: string]: JsonValue;
}

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
interface MessageCommon extends OriginFields {
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
  /** Version 5: where its `providerData` was minted; null when the client gave none. */
  origin: Origin | null;
  /** Version 5: the row it follows (null: a first row of the conversation). */
  parentId: number | null;
  /**
   * Version 5: the rows with the same parent (first rows: the other first rows), oldest first,
   * itself included; on every row of the active path that `get`, `append`, `beginReply`,
   * `endReply`, `editMessage` and `switchBranch` answer. A panel draws `‹ index+1/count ›`.
   */
  siblings: Siblings;
}

/** Version 5: a row's place among its siblings (`count` 1 when it has none). */
export interface Siblings {
  /** Its index in `ids` (0-based). */
  index: number;
  count: number;
  /** Every sibling's id, oldest first, itself included. */
  ids: number[];
}

/** Version 4: where a stored row stands (`beginReply` makes "streaming" rows). */
export type MessageStatus = "complete" | "streaming" | "interrupted";

// ---------------------------------------------------------------------------------------------
// Retention's report

export type StorageTrimReason = "age" | "count" | "tokens";
export type RequestTrimReason = "tokenBudget" | "turnLimit" | "overflowRecovery";
export type TrimReason = StorageTrimReason | RequestTrimReason;

/** What storage retention deleted during one request; `null` in results when nothing was deleted. */
export interface PruneReport {
  droppedMessages: number;
  droppedTurns: number;
  retainedTurns: number;
  reasons: StorageTrimReason[];
  /** Version 5: inactive branches (subtrees off the active path) deleted whole. */
  droppedBranches: number;
}

// ---------------------------------------------------------------------------------------------
// The conversation key

/** The key every per-conversation method takes. */
export interface ConversationKey {
  /** Non-empty, at most 256 characters. */
  conversationId: string;
  /** Default: the session's workspace identity. */
  workspace?: string;
}
