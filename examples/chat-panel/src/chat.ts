/**
 * One chat turn: record the prompt, `prepare` the request, stream the model's answer, run the
 * tool calls it asks for (recording them), and record the reply. On a provider's
 * context-length error it prepares again once with `overflowRecovery`. No `vscode` import: the
 * caller passes the history client, `fetch` and the tool runner, and receives events.
 */

import { randomBytes } from "node:crypto";
import type { ChatHistoryClient, CompactionProposal, Message, PreparedRequest, StoredMessage, ToolCall } from "chat-history-client";
import {
  buildRequest,
  errorMessage,
  isContextLengthError,
  parseStream,
  type ModelSettings,
  type ToolDefinition,
} from "./providers";

/** A request's `cacheKey` (protocol 3: the same for every request of one conversation). */
function cacheKeyOf(request: object): string | undefined {
  const key = (request as { cacheKey?: unknown }).cacheKey;
  return typeof key === "string" && key !== "" ? key : undefined;
}

export type TurnEvent =
  | { type: "prepared"; request: PreparedRequest }
  | { type: "streamStart" }
  | { type: "delta"; text: string }
  | { type: "streamEnd"; toolCalls: ToolCall[] }
  | { type: "streamDiscarded" }
  | { type: "stored"; rows: StoredMessage[] }
  | { type: "usage"; promptTokens: number; cachedTokens: number | null }
  | { type: "calibrated"; calibration: { factor: number; samples: number } }
  | { type: "retry"; reason: string };

export interface TurnOptions {
  client: Pick<ChatHistoryClient, "append" | "prepare" | "reportUsage">;
  conversationId: string;
  model: ModelSettings;
  /** The `provider` param of `prepare`: a kind, or a `chatHistory.providers` alias of the same kind. */
  historyProvider: string;
  tools: ToolDefinition[];
  runTool(call: ToolCall): Promise<string>;
  fetch: typeof fetch;
  on(event: TurnEvent): void;
  signal?: AbortSignal;
  /** Tool rounds before the turn stops asking the model again (default 5). */
  maxToolRounds?: number;
}

/** A failed model request, with the provider's words. */
export class ModelRequestError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly contextLength: boolean,
  ) {
    super(message);
    this.name = "ModelRequestError";
  }
}

async function* decode(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      yield decoder.decode(value, { stream: true });
    }
    const rest = decoder.decode();
    if (rest !== "") yield rest;
  } finally {
    reader.releaseLock();
  }
}

interface Answer {
  text: string;
  toolCalls: ToolCall[];
  /** Prompt tokens the provider reported, when it did. */
  promptTokens: number | null;
}

async function ask(options: TurnOptions, request: PreparedRequest): Promise<Answer> {
  const http = buildRequest(options.model, request.body as Record<string, unknown>, options.tools, cacheKeyOf(request));
  const response = await options.fetch(http.url, {
    method: "POST",
    headers: http.headers,
    body: http.body,
    signal: options.signal,
  });
  if (!response.ok || response.body === null) {
    const text = await response.text().catch(() => "");
    throw new ModelRequestError(
      `${options.model.kind} model at ${http.url} answered ${response.status}: ${errorMessage(text)}`,
      response.status,
      isContextLengthError(response.status, text),
    );
  }
  options.on({ type: "streamStart" });
  let text = "";
  let toolCalls: ToolCall[] = [];
  let promptTokens: number | null = null;
  try {
    for await (const event of parseStream(options.model.kind, decode(response.body))) {
      if (event.type === "text") {
        text += event.text;
        options.on({ type: "delta", text: event.text });
      } else if (event.type === "usage") {
        promptTokens = event.promptTokens;
        options.on({ type: "usage", promptTokens: event.promptTokens, cachedTokens: event.cachedTokens });
      } else {
        toolCalls = event.toolCalls;
      }
    }
  } catch (error) {
    options.on({ type: "streamDiscarded" });
    throw error;
  }
  // The history pairs each result with its call by id, and ids must not repeat within a turn:
  // a call the provider sent without one gets a fresh id.
  toolCalls = toolCalls.map((call) => (call.id === "" ? { ...call, id: `call_${randomBytes(6).toString("hex")}` } : call));
  options.on({ type: "streamEnd", toolCalls });
  return { text, toolCalls, promptTokens };
}

/**
 * After every model reply: tell the server what the provider counted for the request it
 * prepared (`rawEstimatedTokens` against the reported prompt tokens), so its estimates for this
 * provider and model are calibrated. A failure here never fails the turn.
 */
async function reportUsage(options: TurnOptions, request: PreparedRequest, promptTokens: number | null): Promise<void> {
  if (promptTokens === null || promptTokens < 1 || !(request.rawEstimatedTokens >= 1)) return;
  try {
    const calibration = await options.client.reportUsage({
      provider: options.historyProvider,
      model: options.model.model,
      estimatedTokens: request.rawEstimatedTokens,
      promptTokens,
    });
    options.on({ type: "calibrated", calibration });
  } catch {
    // Calibration is an improvement, not a requirement.
  }
}

/**
 * Carries out a compaction proposal: sends its request to the model (no tools; the answer is
 * collected, not shown) and returns the summary text. The caller saves it with `saveSummary`.
 */
export async function summarize(
  options: Pick<TurnOptions, "model" | "fetch" | "signal">,
  proposal: CompactionProposal,
): Promise<string> {
  const http = buildRequest(options.model, proposal.request.body as Record<string, unknown>, [], cacheKeyOf(proposal.request));
  const response = await options.fetch(http.url, { method: "POST", headers: http.headers, body: http.body, signal: options.signal });
  if (!response.ok || response.body === null) {
    const text = await response.text().catch(() => "");
    throw new ModelRequestError(`compaction: the model answered ${response.status}: ${errorMessage(text)}`, response.status, false);
  }
  let text = "";
  for await (const event of parseStream(options.model.kind, decode(response.body))) {
    if (event.type === "text") text += event.text;
  }
  text = text.trim();
  if (text === "") throw new Error("compaction: the model's summary was empty");
  return text;
}

/**
 * Runs one turn for `prompt`; resolves when the reply is recorded. With `promptStored` (a
 * regenerate) the prompt is already the conversation's last row and is not appended again.
 */
export async function runTurn(options: TurnOptions, prompt: string, { promptStored = false } = {}): Promise<void> {
  const { client, conversationId } = options;
  if (!promptStored) {
    const user = await client.append({ conversationId, messages: [{ role: "user", content: prompt }] });
    options.on({ type: "stored", rows: user.messages });
  }
  const maxRounds = options.maxToolRounds ?? 5;
  let retried = false;
  let overflowRecovery = false;
  for (let round = 0; ; round++) {
    const request = await client.prepare({
      conversationId,
      provider: options.historyProvider,
      model: options.model.model,
      tools: options.tools,
      ...(overflowRecovery ? { overflowRecovery: true } : {}),
    });
    overflowRecovery = false;
    options.on({ type: "prepared", request });
    let answer: Answer;
    try {
      answer = await ask(options, request);
    } catch (error) {
      if (error instanceof ModelRequestError && error.contextLength && !retried) {
        retried = true;
        overflowRecovery = true;
        options.on({ type: "retry", reason: error.message });
        round--;
        continue;
      }
      throw error;
    }
    await reportUsage(options, request, answer.promptTokens);
    if (answer.toolCalls.length === 0 || round >= maxRounds) {
      const stored = await client.append({
        conversationId,
        messages: [{ role: "assistant", content: answer.text }],
      });
      options.on({ type: "stored", rows: stored.messages });
      return;
    }
    const rows: Message[] = [{ role: "assistant", content: answer.text === "" ? null : answer.text, toolCalls: answer.toolCalls }];
    for (const call of answer.toolCalls) {
      rows.push({ role: "tool", toolCallId: call.id, name: call.name, content: await options.runTool(call) });
    }
    const stored = await client.append({ conversationId, messages: rows });
    options.on({ type: "stored", rows: stored.messages });
  }
}
