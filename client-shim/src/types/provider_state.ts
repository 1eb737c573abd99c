/**
 * Provider state that stays valid (version 5): where a row's `providerData` was minted
 * (`Origin`), `chatHistory/saveCompaction` (a provider's own compaction) and
 * `chatHistory/reportProviderError` (a refusal of provider state, fenced so that the next
 * `prepare` succeeds).
 */

import type { ConversationKey, JsonObject, JsonValue, ProviderKind } from "./common";

/** Where a row's `providerData` was minted: the request that produced it. */
export interface Origin {
  provider: ProviderKind;
  model: string | null;
  /** The base URL the client sent to; the kind's public API when it named none. */
  endpoint: string;
  /** An opaque label of the account, organisation or key (never the key itself). */
  scope: string | null;
}

/** An origin as a client gives it (`endpoint` defaults to the kind's public API, `scope` to none). */
export interface OriginParam {
  provider: ProviderKind;
  model?: string | null;
  endpoint?: string | null;
  scope?: string | null;
}

/** How a client says where state was minted: the origin itself, or the alias it sent to. */
export interface OriginFields {
  /** Never with `originAlias`. */
  origin?: OriginParam;
  /** An alias of `chatHistory.providers` (or a bare kind): the server fills the origin from it. */
  originAlias?: string;
}

/** The reasons `reportProviderError` tells apart: the four refusals of provider state. */
export type RefusalReason = "thinking_signature" | "encrypted_content" | "thought_signature" | "compaction";

export interface SaveCompactionParams extends ConversationKey, OriginFields {
  /** The newest row the items stand in for (a row of this conversation). */
  coversThroughId: number;
  /** What the provider's own compaction returned (an OpenAI Responses `compaction` item, an
   * Anthropic compaction block), 1 to 1,000 objects, sent back as they are. */
  items: JsonObject[];
}
export interface SaveCompactionResult {
  coversThroughId: number;
  /** Epoch milliseconds. */
  savedAt: number;
  origin: Origin;
}

export interface ReportProviderErrorParams extends ConversationKey {
  /** The provider kind or alias the refused request went to. */
  provider: string;
  model?: string;
  /** The HTTP status of the provider's answer. */
  status: number;
  /** The provider's error answer as the client received it (parsed JSON or its text); never
   * stored, logged or echoed. */
  body: JsonValue;
}
export interface ReportProviderErrorResult {
  /** How many rows (and native compactions) the report fenced from that target. */
  fenced: number;
  /** The refusal it was; null when the error refused no provider state (nothing fenced). */
  reason: RefusalReason | null;
}
