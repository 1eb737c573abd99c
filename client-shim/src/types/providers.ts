/** The provider request bodies that `format` and `prepare` return, by provider kind. */

import type { JsonObject, JsonValue, ProviderKind } from "./common";

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
