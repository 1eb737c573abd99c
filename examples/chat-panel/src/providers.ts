/**
 * Talking to a model: the HTTP request for a prepared body, and the streamed answer parsed into
 * events. Three wire formats: OpenAI-compatible Chat Completions (OpenAI, Ollama's /v1, LM
 * Studio, vLLM…) with SSE, Anthropic Messages with SSE, and Ollama's native /api/chat with
 * NDJSON. No `vscode` import; the parsers are pure and unit-tested on real wire text.
 */

import type { JsonObject, JsonValue, ToolCall } from "chat-history-client";

export type ModelKind = "openai" | "anthropic" | "ollama";
export const MODEL_KINDS: readonly ModelKind[] = ["openai", "anthropic", "ollama"];

export interface ModelSettings {
  kind: ModelKind;
  /** e.g. http://localhost:11434/v1 (openai), https://api.anthropic.com (anthropic), http://localhost:11434 (ollama). */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Anthropic requires `max_tokens`; the others get it only when set. */
  maxOutputTokens: number;
}

export const DEFAULT_BASE_URLS: Record<ModelKind, string> = {
  openai: "http://localhost:11434/v1",
  anthropic: "https://api.anthropic.com",
  ollama: "http://localhost:11434",
};

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: JsonObject;
}

export interface HttpRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * Whether an OpenAI-compatible server at `baseUrl` takes `prompt_cache_key` (OpenAI's own API and
 * Azure OpenAI route requests by it to a warm prompt cache; other servers may refuse the field).
 */
export function acceptsPromptCacheKey(baseUrl: string): boolean {
  try {
    const host = new URL(baseUrl).hostname;
    return host === "api.openai.com" || host.endsWith(".openai.azure.com");
  } catch {
    return false;
  }
}

/**
 * The HTTP request that sends `body` (the `body` of a `prepare` result for this kind). `cacheKey`
 * (the prepared request's, protocol 3) goes as `prompt_cache_key` to servers that take it.
 */
export function buildRequest(
  settings: ModelSettings,
  body: Record<string, unknown>,
  tools: ToolDefinition[],
  cacheKey?: string,
): HttpRequest {
  const base = (settings.baseUrl.trim() || DEFAULT_BASE_URLS[settings.kind]).replace(/\/+$/, "");
  const headers: Record<string, string> = { "content-type": "application/json" };
  switch (settings.kind) {
    case "openai": {
      if (settings.apiKey) headers.authorization = `Bearer ${settings.apiKey}`;
      const payload: Record<string, unknown> = {
        ...body,
        model: settings.model,
        stream: true,
        stream_options: { include_usage: true },
      };
      if (tools.length > 0) payload.tools = tools.map((t) => ({ type: "function", function: t }));
      if (cacheKey && acceptsPromptCacheKey(base)) payload.prompt_cache_key = cacheKey;
      return { url: `${base}/chat/completions`, headers, body: JSON.stringify(payload) };
    }
    case "anthropic": {
      if (settings.apiKey) headers["x-api-key"] = settings.apiKey;
      headers["anthropic-version"] = "2023-06-01";
      const payload: Record<string, unknown> = {
        ...body,
        model: settings.model,
        max_tokens: settings.maxOutputTokens,
        stream: true,
      };
      if (tools.length > 0) {
        payload.tools = tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
      }
      return { url: `${base}/v1/messages`, headers, body: JSON.stringify(payload) };
    }
    case "ollama": {
      if (settings.apiKey) headers.authorization = `Bearer ${settings.apiKey}`;
      const payload: Record<string, unknown> = { ...body, model: settings.model, stream: true };
      if (tools.length > 0) payload.tools = tools.map((t) => ({ type: "function", function: t }));
      return { url: `${base}/api/chat`, headers, body: JSON.stringify(payload) };
    }
  }
}

/**
 * A `done` event's tool call has `id` "" when the provider gave it none (Ollama's native API).
 * `cachedTokens`: the prompt tokens the provider's prompt cache served (OpenAI
 * `prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`), null when it
 * does not say.
 */
export type ModelEvent =
  | { type: "text"; text: string }
  | { type: "usage"; promptTokens: number; completionTokens: number | null; cachedTokens: number | null }
  /** Opaque provider state of the reply, to store as its `providerData` (Anthropic's signed
   * thinking blocks): the history server sends it back only where it stays valid. */
  | { type: "state"; providerData: JsonObject }
  | { type: "done"; toolCalls: ToolCall[]; finishReason: string | null };

/** Splits a text stream into lines, across chunk boundaries. */
export async function* lines(chunks: AsyncIterable<string>): AsyncGenerator<string> {
  let buffer = "";
  for await (const chunk of chunks) {
    buffer += chunk;
    let newline: number;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      yield buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
    }
  }
  if (buffer !== "") yield buffer;
}

/** Server-sent events: `{event, data}` per blank-line-terminated block (multi-line data joined). */
export async function* sse(chunks: AsyncIterable<string>): AsyncGenerator<{ event: string; data: string }> {
  let event = "message";
  let data: string[] = [];
  for await (const line of lines(chunks)) {
    if (line === "") {
      if (data.length > 0) yield { event, data: data.join("\n") };
      event = "message";
      data = [];
    } else if (line.startsWith(":")) {
      continue;
    } else {
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
  }
  if (data.length > 0) yield { event, data: data.join("\n") };
}

/** Tool-call arguments as an object when they are a JSON object, else the text as the model wrote it. */
export function toolArguments(text: string): JsonObject | string {
  try {
    const value: unknown = JSON.parse(text === "" ? "{}" : text);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as JsonObject;
  } catch {
    // Not JSON: keep the text.
  }
  return text;
}

export class ModelStreamError extends Error {}

async function* openaiEvents(chunks: AsyncIterable<string>): AsyncGenerator<ModelEvent> {
  const calls: { id: string; name: string; args: string }[] = [];
  let finishReason: string | null = null;
  for await (const { data } of sse(chunks)) {
    if (data === "[DONE]") break;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new ModelStreamError(chunk.error.message ?? JSON.stringify(chunk.error));
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? {};
      if (typeof delta.content === "string" && delta.content !== "") yield { type: "text", text: delta.content };
      for (const part of delta.tool_calls ?? []) {
        const index = typeof part.index === "number" ? part.index : calls.length;
        calls[index] ??= { id: "", name: "", args: "" };
        if (part.id) calls[index].id = part.id;
        if (part.function?.name) calls[index].name += part.function.name;
        if (typeof part.function?.arguments === "string") calls[index].args += part.function.arguments;
      }
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
    if (chunk.usage && typeof chunk.usage.prompt_tokens === "number") {
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens;
      yield {
        type: "usage",
        promptTokens: chunk.usage.prompt_tokens,
        completionTokens: chunk.usage.completion_tokens ?? null,
        cachedTokens: typeof cached === "number" ? cached : null,
      };
    }
  }
  const toolCalls = calls
    .filter((c) => c !== undefined)
    .map((c) => ({ id: c.id, name: c.name, arguments: toolArguments(c.args) }));
  yield { type: "done", toolCalls, finishReason };
}

async function* anthropicEvents(chunks: AsyncIterable<string>): AsyncGenerator<ModelEvent> {
  const blocks: { id: string; name: string; args: string }[] = [];
  // Thinking blocks (extended thinking) with their signatures, as the API wants them back.
  const thinking: ({ type: "thinking"; thinking: string; signature: string } | { type: "redacted_thinking"; data: string })[] = [];
  let promptTokens: number | null = null;
  let cachedTokens: number | null = null;
  let finishReason: string | null = null;
  for await (const { event, data } of sse(chunks)) {
    const payload = JSON.parse(data);
    switch (event === "message" ? payload.type : event) {
      case "message_start": {
        const usage = payload.message?.usage ?? {};
        promptTokens =
          (usage.input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
        cachedTokens = typeof usage.cache_read_input_tokens === "number" ? usage.cache_read_input_tokens : null;
        break;
      }
      case "content_block_start":
        if (payload.content_block?.type === "tool_use") {
          blocks[payload.index] = { id: payload.content_block.id, name: payload.content_block.name, args: "" };
        } else if (payload.content_block?.type === "thinking") {
          thinking[payload.index] = { type: "thinking", thinking: payload.content_block.thinking ?? "", signature: payload.content_block.signature ?? "" };
        } else if (payload.content_block?.type === "redacted_thinking") {
          thinking[payload.index] = { type: "redacted_thinking", data: payload.content_block.data ?? "" };
        }
        break;
      case "content_block_delta":
        if (payload.delta?.type === "text_delta") yield { type: "text", text: payload.delta.text };
        else if (payload.delta?.type === "input_json_delta" && blocks[payload.index]) {
          blocks[payload.index].args += payload.delta.partial_json;
        } else if (payload.delta?.type === "thinking_delta" && thinking[payload.index]?.type === "thinking") {
          (thinking[payload.index] as { thinking: string }).thinking += payload.delta.thinking;
        } else if (payload.delta?.type === "signature_delta" && thinking[payload.index]?.type === "thinking") {
          (thinking[payload.index] as { signature: string }).signature = payload.delta.signature;
        }
        break;
      case "message_delta":
        if (payload.delta?.stop_reason) finishReason = payload.delta.stop_reason;
        if (promptTokens !== null) {
          yield { type: "usage", promptTokens, completionTokens: payload.usage?.output_tokens ?? null, cachedTokens };
        }
        break;
      case "error":
        throw new ModelStreamError(payload.error?.message ?? data);
    }
  }
  const toolCalls = blocks.filter((b) => b !== undefined).map((b) => ({ id: b.id, name: b.name, arguments: toolArguments(b.args) }));
  const signed: JsonObject[] = thinking.filter((b) => b !== undefined).map((b) => ({ ...b }));
  if (signed.length > 0) yield { type: "state", providerData: { anthropic: { thinking: signed } } };
  yield { type: "done", toolCalls, finishReason };
}

async function* ollamaEvents(chunks: AsyncIterable<string>): AsyncGenerator<ModelEvent> {
  const toolCalls: ToolCall[] = [];
  let finishReason: string | null = null;
  for await (const line of lines(chunks)) {
    if (line.trim() === "") continue;
    const chunk = JSON.parse(line);
    if (chunk.error) throw new ModelStreamError(String(chunk.error));
    const message = chunk.message ?? {};
    if (typeof message.content === "string" && message.content !== "") yield { type: "text", text: message.content };
    for (const call of message.tool_calls ?? []) {
      const args = call.function?.arguments;
      toolCalls.push({
        // Ollama's native API gives calls no id: "" here, and the turn gives it a unique one.
        id: call.id ?? "",
        name: call.function?.name ?? "",
        arguments: typeof args === "string" ? toolArguments(args) : (args ?? {}),
      });
    }
    if (chunk.done) {
      finishReason = chunk.done_reason ?? "stop";
      if (typeof chunk.prompt_eval_count === "number") {
        yield { type: "usage", promptTokens: chunk.prompt_eval_count, completionTokens: chunk.eval_count ?? null, cachedTokens: null };
      }
    }
  }
  yield { type: "done", toolCalls, finishReason };
}

/** The events of a streamed answer of `kind`, from its body's text chunks. */
export function parseStream(kind: ModelKind, chunks: AsyncIterable<string>): AsyncGenerator<ModelEvent> {
  switch (kind) {
    case "openai":
      return openaiEvents(chunks);
    case "anthropic":
      return anthropicEvents(chunks);
    case "ollama":
      return ollamaEvents(chunks);
  }
}

/** Whether a failed response means "the prompt is longer than the model's context". */
export function isContextLengthError(status: number, bodyText: string): boolean {
  if (status !== 400 && status !== 413 && status !== 422) return false;
  return /context_length_exceeded|context length|context window|maximum context|prompt is too long|too many tokens|exceeds the context/i.test(
    bodyText,
  );
}

/**
 * Whether a failed response may be a refusal of provider state the request sent back (an invalid
 * thinking signature, encrypted content it cannot verify, a missing thought signature, a
 * compaction item it did not mint): worth reporting to the history server
 * (`reportProviderError`), which tells for sure and fences what caused it.
 */
export function mayRefuseProviderState(status: number, bodyText: string): boolean {
  if (status !== 400 && status !== 422) return false;
  return /signature|encrypted[_ ]content|thought_signature|compaction/i.test(bodyText);
}

/** A provider's error body as `reportProviderError` takes it: the parsed JSON, else the text. */
export function errorBody(bodyText: string): JsonValue {
  try {
    return JSON.parse(bodyText) as JsonValue;
  } catch {
    return bodyText;
  }
}

/** The message of a provider's error body (OpenAI/Anthropic `{error: {message}}`, Ollama `{error}`), else the text. */
export function errorMessage(bodyText: string): string {
  try {
    const value = JSON.parse(bodyText);
    const message = value?.error?.message ?? value?.error ?? value?.message;
    if (typeof message === "string") return message;
  } catch {
    // Plain text.
  }
  return bodyText.slice(0, 500);
}
