/**
 * One chat turn: record the prompt, `prepare` the request, stream the model's answer, run the
 * tool calls it asks for (recording them), and record the reply. On a provider's
 * context-length error it prepares again once with `overflowRecovery`. No `vscode` import: the
 * caller passes the history client, `fetch` and the tool runner, and receives events.
 */

import { randomBytes } from "node:crypto";
import type { ChatHistoryClient, Message, PreparedRequest, StoredMessage, ToolCall } from "chat-history-client";
import {
  buildRequest,
  errorMessage,
  isContextLengthError,
  parseStream,
  type ModelSettings,
  type ToolDefinition,
} from "./providers";

export type TurnEvent =
  | { type: "prepared"; request: PreparedRequest }
  | { type: "streamStart" }
  | { type: "delta"; text: string }
  | { type: "streamEnd"; toolCalls: ToolCall[] }
  | { type: "streamDiscarded" }
  | { type: "stored"; rows: StoredMessage[] }
  | { type: "usage"; promptTokens: number }
  | { type: "retry"; reason: string };

export interface TurnOptions {
  client: Pick<ChatHistoryClient, "append" | "prepare">;
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
}

async function ask(options: TurnOptions, request: PreparedRequest): Promise<Answer> {
  const http = buildRequest(options.model, request.body as Record<string, unknown>, options.tools);
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
  try {
    for await (const event of parseStream(options.model.kind, decode(response.body))) {
      if (event.type === "text") {
        text += event.text;
        options.on({ type: "delta", text: event.text });
      } else if (event.type === "usage") {
        options.on({ type: "usage", promptTokens: event.promptTokens });
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
  return { text, toolCalls };
}

/** Runs one turn for `prompt`; resolves when the reply is recorded. */
export async function runTurn(options: TurnOptions, prompt: string): Promise<void> {
  const { client, conversationId } = options;
  const user = await client.append({ conversationId, messages: [{ role: "user", content: prompt }] });
  options.on({ type: "stored", rows: user.messages });
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
