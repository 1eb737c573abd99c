/**
 * One chat turn: record the prompt, `prepare` the request, stream the model's answer, run the
 * tool calls it asks for (recording them), and record the reply. On a provider's
 * context-length error it prepares again once with `overflowRecovery`. No `vscode` import: the
 * caller passes the history client, `fetch` and the tool runner, and receives events.
 */

import { randomBytes } from "node:crypto";
import { ConversationChangedError, InvalidParamsError, streamReply } from "chat-history-client";
import type { ChatHistoryClient, CompactionProposal, JsonObject, Message, PreparedRequest, ProviderData, ReplyDelta, StoredMessage, ToolCall } from "chat-history-client";
import {
  buildRequest,
  errorBody,
  errorMessage,
  isContextLengthError,
  mayRefuseProviderState,
  ModelStreamError,
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
  /** Version 4: the reply's streaming row is stored (its id is the bubble's from now on). */
  | { type: "replyBegun"; row: StoredMessage }
  | { type: "delta"; text: string }
  | { type: "streamEnd"; toolCalls: ToolCall[] }
  | { type: "streamDiscarded" }
  /** The reply stopped before it was complete: its partial text is shown (stored only with `storeReplies`). */
  | { type: "interrupted"; partial: string }
  | { type: "stored"; rows: StoredMessage[] }
  | { type: "usage"; promptTokens: number; cachedTokens: number | null }
  | { type: "calibrated"; calibration: { factor: number; samples: number } }
  /**
   * The request is sent once more: `overflow`, the model said it was too long (prepared again
   * with `overflowRecovery`); `providerState`, the model refused provider state the request sent
   * back, the history server fenced it (`reportProviderError`), and it is prepared again.
   */
  | { type: "retry"; reason: string; kind: "overflow" | "providerState" };

export interface TurnOptions {
  client: ChatHistoryClient;
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
  /**
   * Version 4: every reply is stored while it streams (`streamReply`), so a reload or a crash
   * keeps what was shown; a cut reply stays stored, interrupted. Without it (an older server),
   * a reply is appended once complete and a cut one is not stored.
   */
  storeReplies?: boolean;
}

/**
 * A reply that did not complete: the connection closed in the middle (`cut`), the body ended
 * without the provider saying the reply was complete (`unfinished`: no finish reason / [DONE]),
 * or the person pressed Stop (`stopped`). Nothing of it was stored; `partial` is the text that
 * had arrived (the caller may let the person keep it).
 */
export class InterruptedReply extends Error {
  constructor(
    readonly why: "cut" | "unfinished" | "stopped",
    readonly partial: string,
    /** The reply was inside a tool call when it stopped. */
    readonly inToolCall: boolean,
    /** With `storeReplies`: the reply's row, stored as interrupted (null: nothing of it stored). */
    readonly stored: StoredMessage | null = null,
    /**
     * With `storeReplies`: the reply's row was begun but could not be ended (`error`: why the
     * store failed, e.g. the history server stopped). It may still stand, streaming, as far as
     * the server acknowledged it: {@link settleCutReply} ends it.
     */
    readonly unsettled: { rowId: number; error: unknown } | null = null,
  ) {
    const after = stored !== null ? " What arrived is saved." : why === "stopped" ? " Nothing of it was stored." : " Nothing of this reply was stored.";
    super(`${whyWords(why, inToolCall)}${after}`);
    this.name = "InterruptedReply";
  }

  /** What happened, without what was stored. */
  get reason(): string {
    return whyWords(this.why, this.inToolCall);
  }
}

function whyWords(why: InterruptedReply["why"], inToolCall: boolean): string {
  const where = inToolCall ? " while it was writing a tool call" : "";
  switch (why) {
    case "cut":
      return `The connection to the model closed in the middle of the reply${where}.`;
    case "unfinished":
      return `The model's reply ended without saying it was complete${where}; it may be cut off.`;
    case "stopped":
      return "You stopped the reply.";
  }
}

/** The words for a failed HTTP answer: the provider's message, never a proxy's HTML page. */
export function failureWords(url: string, status: number, statusText: string, bodyText: string): string {
  const answered = `The model server at ${url} answered ${status}${statusText ? ` ${statusText}` : ""}`;
  if (/^\s*<(!doctype|html|head|body)/i.test(bodyText) || /<\/(html|body|h1|center)>/i.test(bodyText)) {
    const gateway = status === 502 || status === 503 || status === 504;
    return `${answered}${gateway ? ": a proxy or gateway between you and the model could not reach it" : " with a web page instead of an answer"}. Try again in a moment.`;
  }
  const message = errorMessage(bodyText).trim();
  return message === "" ? `${answered}.` : `${answered}: ${message}`;
}

/** The words for a request that never got an answer (connection refused, DNS, TLS…). */
function unreachableWords(url: string, error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  const detail = cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error);
  return `Could not reach the model server at ${url} (${detail}). Is it running, and is chatPanel.baseUrl right?`;
}

/** A failed model request, with the provider's words. */
export class ModelRequestError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly contextLength: boolean,
    /** The provider's answer as received (reported to the history server, never shown whole). */
    readonly body = "",
  ) {
    super(message);
    this.name = "ModelRequestError";
  }
}

/**
 * The text of a model's answer as it arrives. Takes the `Response`, not its body, and holds it
 * until the body is read: Node's fetch (undici) cancels the body of a `Response` that was
 * garbage-collected, and the body then reads as empty and ended, so a reply not read at once
 * (while a slow history server stores its row, `beginReply`) arrived as nothing, "unfinished".
 */
async function* decode(response: Response): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const body = response.body;
  if (body === null) return;
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
    held.delete(response);
  }
}

/** The responses whose bodies are being read (see {@link decode}). */
const held = new Set<Response>();

/** Lets `response` go: its body cancelled when nobody reads it (a reader's lock keeps it). */
function release(response: Response): void {
  held.delete(response);
  if (response.body !== null && !response.body.locked) void response.body.cancel().catch(() => undefined);
}

interface Answer {
  text: string;
  toolCalls: ToolCall[];
  /** Prompt tokens the provider reported, when it did. */
  promptTokens: number | null;
  /** With `storeReplies`: the reply's row, stored complete (null: append it). */
  row: StoredMessage | null;
}

/** The model's answer so far, filled in by {@link replyDeltas} as it is read. */
interface Progress {
  text: string;
  toolCalls: ToolCall[];
  promptTokens: number | null;
  /** Known only when the stream ended (a cut stream's half-written calls are never parsed). */
  inToolCall: boolean;
  /** The reply's provider state (signed thinking), stored with it; null: none. */
  providerData: JsonObject | null;
}

/** Sends the request; the answer's body once the model server answered 2xx. */
async function open(options: TurnOptions, request: PreparedRequest, signal = options.signal): Promise<Response> {
  const http = buildRequest(options.model, request.body as Record<string, unknown>, options.tools, cacheKeyOf(request));
  let response: Response;
  try {
    response = await options.fetch(http.url, {
      method: "POST",
      headers: http.headers,
      body: http.body,
      signal,
    });
  } catch (error) {
    if (options.signal?.aborted) throw new InterruptedReply("stopped", "", false);
    throw new ModelRequestError(unreachableWords(http.url, error), 0, false);
  }
  if (!response.ok || response.body === null) {
    const text = await response.text().catch(() => "");
    throw new ModelRequestError(
      failureWords(http.url, response.status, response.statusText, text),
      response.status,
      isContextLengthError(response.status, text),
      text,
    );
  }
  held.add(response); // until its body is read or left (decode): never collected before
  return response;
}

/**
 * The reply's text as it streams (and its complete tool calls last), telling the panel as it
 * goes. Throws {@link InterruptedReply} when it is cut, unfinished or stopped, and the
 * provider's {@link ModelStreamError}. `trimmed`: a continued reply's `continueTrimmed` (the
 * stored row still ends with it): the same characters at the continuation's start are dropped.
 */
async function* replyDeltas(options: TurnOptions, response: Response, progress: Progress, trimmed = ""): AsyncGenerator<string | ReplyDelta> {
  let finishReason: string | null = null;
  let toolCalls: ToolCall[] = [];
  let skip = trimmed;
  const interrupted = (why: InterruptedReply["why"]) => {
    options.on({ type: "interrupted", partial: progress.text });
    return new InterruptedReply(why, progress.text, progress.inToolCall);
  };
  try {
    for await (const event of parseStream(options.model.kind, decode(response))) {
      if (event.type === "text") {
        let text = event.text;
        while (skip !== "" && text !== "" && text[0] === skip[0]) [text, skip] = [text.slice(1), skip.slice(1)];
        if (text !== "") skip = "";
        if (text === "") continue;
        progress.text += text;
        options.on({ type: "delta", text });
        yield text;
      } else if (event.type === "state") {
        progress.providerData = event.providerData;
      } else if (event.type === "usage") {
        progress.promptTokens = event.promptTokens;
        options.on({ type: "usage", promptTokens: event.promptTokens, cachedTokens: event.cachedTokens });
      } else {
        toolCalls = event.toolCalls;
        finishReason = event.finishReason;
      }
    }
  } catch (error) {
    if (options.signal?.aborted) throw interrupted("stopped");
    if (error instanceof ModelStreamError) {
      // The provider said why, in the stream: its words.
      options.on({ type: "streamDiscarded" });
      throw error;
    }
    // The body could not be read to its end ("terminated", a reset): the reply is cut.
    throw interrupted("cut");
  }
  if (finishReason === null) {
    progress.inToolCall ||= toolCalls.length > 0;
    throw interrupted("unfinished");
  }
  // The history pairs each result with its call by id, and ids must not repeat within a turn:
  // a call the provider sent without one gets a fresh id.
  progress.toolCalls = toolCalls.map((call) => (call.id === "" ? { ...call, id: `call_${randomBytes(6).toString("hex")}` } : call));
  options.on({ type: "streamEnd", toolCalls: progress.toolCalls });
  if (progress.toolCalls.length > 0 || progress.providerData !== null) {
    yield {
      ...(progress.toolCalls.length > 0 ? { toolCalls: progress.toolCalls } : {}),
      ...(progress.providerData !== null ? { providerData: progress.providerData as ProviderData } : {}),
    };
  }
}

const newProgress = (): Progress => ({ text: "", toolCalls: [], promptTokens: null, inToolCall: false, providerData: null });

/** An older server: the reply is read to its end, and the caller appends it once complete. */
async function ask(options: TurnOptions, request: PreparedRequest): Promise<Answer> {
  const response = await open(options, request);
  options.on({ type: "streamStart" });
  const progress = newProgress();
  for await (const delta of replyDeltas(options, response, progress)) void delta;
  return { ...progress, row: null };
}

/**
 * Version 4: the reply is stored while it streams (`streamReply`; with `continueId`, into that
 * interrupted row). Complete: its row. Cut or stopped: the row stays, interrupted, and
 * {@link InterruptedReply} carries it; a reply that showed nothing, or that the provider
 * refused in its stream, is discarded (a continued one always keeps its row).
 */
async function askStored(options: TurnOptions, request: PreparedRequest, continueId: number | undefined, pending: { row?: StoredMessage } = {}): Promise<Answer> {
  // The model is read only while its reply can be stored: once the store fails (the history
  // server stopped), the request is cut and nothing more of it is shown.
  const reading = new AbortController();
  const response = await open(options, request, options.signal ? AbortSignal.any([options.signal, reading.signal]) : reading.signal);
  options.on({ type: "streamStart" });
  const progress = newProgress();
  let live = true;
  const streaming: TurnOptions = { ...options, on: (event) => live && options.on(event) };
  let begun: number | null = null;
  // A row the caller began (a Regenerate's branch): streamed into; from here on streamReply ends it.
  const row = pending.row;
  pending.row = undefined;
  let result: Awaited<ReturnType<typeof streamReply>>;
  try {
    result = await streamReply(options.client, {
      conversationId: options.conversationId,
      ...(continueId === undefined ? {} : { continueId }),
      ...(row === undefined ? {} : { begun: row }),
      deltas: replyDeltas(streaming, response, progress, continueId === undefined ? "" : (request.continueTrimmed ?? "")),
      signal: options.signal,
      metadata: { model: options.model.model },
      onBegin: (row) => {
        begun = row.id;
        options.on({ type: "replyBegun", row });
      },
      decide: ({ text, error, aborted }) => {
        if (continueId !== undefined) return undefined;
        if (error instanceof ModelStreamError) return "discard";
        return (error !== undefined || aborted) && text === "" ? "discard" : undefined;
      },
    });
  } finally {
    // Read to its end, or left (an abort, a refused beginReply): let it go either way.
    release(response);
  }
  live = false;
  if (result.status !== "complete") reading.abort();
  if (result.status === "complete" && result.message !== null) return { ...progress, row: result.message };
  if (result.message === null && begun !== null && result.status !== "discard") {
    // The row stands as far as the server acknowledged it; the caller ends it (settleCutReply).
    throw new InterruptedReply("cut", progress.text, progress.inToolCall, null, { rowId: begun, error: result.error });
  }
  if (result.status === "discard") {
    options.on({ type: "streamDiscarded" });
    throw result.error ?? new InterruptedReply("stopped", "", false);
  }
  if (result.message !== null) options.on({ type: "stored", rows: [result.message] });
  const error = result.error;
  if (error instanceof ModelStreamError) throw error;
  const partial = result.message?.content ?? progress.text;
  const why = error instanceof InterruptedReply ? error.why : options.signal?.aborted ? "stopped" : "cut";
  throw new InterruptedReply(why, partial, progress.inToolCall, result.message);
}

/**
 * Ends a reply whose end could not be stored (its history server stopped mid-reply and a new one
 * runs) as interrupted now, rather than when the dead writer's lease expires (up to 30 s):
 * `endReply` first; a server that refuses to end a reply another process began (-32602 `id`)
 * gets the row replaced by its stored text, interrupted (`truncate` from it with
 * `expectedLastId`, then `append` with that status), while it is still the conversation's newest
 * row and streams. A row without text is deleted, as a reply that showed nothing is. Returns the
 * row as stored now (null: none is left, or the conversation changed meanwhile).
 */
export async function settleCutReply(client: ChatHistoryClient, conversationId: string, rowId: number, metadata: JsonObject = {}): Promise<StoredMessage | null> {
  try {
    return (await client.endReply({ conversationId, id: rowId, status: "interrupted", metadata })).message;
  } catch (error) {
    if (!(error instanceof InvalidParamsError && error.field === "id")) throw error;
  }
  const row = (await client.get({ conversationId, limit: 1 })).messages.at(-1);
  if (row?.id !== rowId) return null;
  if (row.status !== "streaming") return row;
  try {
    await client.truncate({ conversationId, fromId: rowId, expectedLastId: rowId });
  } catch (error) {
    if (error instanceof ConversationChangedError) return null;
    throw error;
  }
  if (row.content === "") return null;
  // Its text only: a tool call is stored with its results or not at all.
  const kept = await client.append({ conversationId, messages: [{ role: "assistant", content: row.content, metadata: { ...row.metadata, ...metadata }, status: "interrupted" }] });
  return kept.messages[0];
}

/**
 * Version 5: a model's refusal of provider state the request sent back (a thinking signature,
 * encrypted content…) reported to the history server (`reportProviderError`), which fences that
 * state from this target. True when it fenced something (a new `prepare` then succeeds); false
 * when the error was of another kind, or the server could not say (an older one).
 */
export async function fenceRefusedState(options: Pick<TurnOptions, "client" | "conversationId" | "historyProvider" | "model">, error: ModelRequestError): Promise<boolean> {
  try {
    const report = await options.client.reportProviderError({
      conversationId: options.conversationId,
      provider: options.historyProvider,
      model: options.model.model,
      status: error.status,
      body: errorBody(error.body),
    });
    return report.fenced > 0;
  } catch {
    return false;
  }
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
  held.add(response);
  for await (const event of parseStream(options.model.kind, decode(response))) {
    if (event.type === "text") text += event.text;
  }
  text = text.trim();
  if (text === "") throw new Error("compaction: the model's summary was empty");
  return text;
}

/**
 * Runs one turn for `prompt`; resolves when the reply is recorded. With `promptStored` (a
 * regenerate) the prompt is already the conversation's last row and is not appended again. With
 * `continueId` (version 4, `storeReplies`: Continue of an interrupted reply, the conversation's
 * newest row) the model carries on from that reply, streamed into the same row. With `begun`
 * (version 5, a Regenerate: the streaming row the caller began after the prompt, a new branch)
 * the reply streams into that row; a turn that fails before it streams discards it, and the
 * reply it would have replaced is the conversation's again.
 */
export async function runTurn(
  options: TurnOptions,
  prompt: string,
  { promptStored = false, continueId, begun }: { promptStored?: boolean; continueId?: number; begun?: StoredMessage } = {},
): Promise<void> {
  const pending: { row?: StoredMessage } = options.storeReplies && begun !== undefined ? { row: begun } : {};
  try {
    await turnRounds(options, prompt, { promptStored, continueId }, pending);
  } catch (error) {
    const row = pending.row;
    if (row !== undefined) await options.client.endReply({ conversationId: options.conversationId, id: row.id, status: "discard" }).catch(() => undefined);
    throw error;
  }
}

async function turnRounds(
  options: TurnOptions,
  prompt: string,
  { promptStored, continueId }: { promptStored: boolean; continueId?: number },
  pending: { row?: StoredMessage },
): Promise<void> {
  const { client, conversationId } = options;
  if (!promptStored && continueId === undefined) {
    const user = await client.append({ conversationId, messages: [{ role: "user", content: prompt }] });
    options.on({ type: "stored", rows: user.messages });
  }
  const maxRounds = options.maxToolRounds ?? 5;
  let retried = false;
  let stateReported = false;
  let overflowRecovery = false;
  let continuing = options.storeReplies ? continueId : undefined;
  for (let round = 0; ; round++) {
    if (options.signal?.aborted) throw new InterruptedReply("stopped", "", false);
    const request = await client.prepare({
      conversationId,
      provider: options.historyProvider,
      model: options.model.model,
      tools: options.tools,
      ...(overflowRecovery ? { overflowRecovery: true } : {}),
      ...(continuing === undefined ? {} : { continueId: continuing }),
    });
    overflowRecovery = false;
    options.on({ type: "prepared", request });
    let answer: Answer;
    try {
      answer = options.storeReplies ? await askStored(options, request, continuing, pending) : await ask(options, request);
    } catch (error) {
      if (error instanceof ModelRequestError && error.contextLength && !retried) {
        retried = true;
        overflowRecovery = true;
        options.on({ type: "retry", reason: error.message, kind: "overflow" });
        round--;
        continue;
      }
      if (error instanceof ModelRequestError && !stateReported && mayRefuseProviderState(error.status, error.body) && (await fenceRefusedState(options, error))) {
        // The history server stopped sending the refused state to this model: prepared again
        // without it, once.
        stateReported = true;
        options.on({ type: "retry", reason: error.message, kind: "providerState" });
        round--;
        continue;
      }
      throw error;
    }
    continuing = undefined;
    await reportUsage(options, request, answer.promptTokens);
    if (answer.row !== null) {
      // Stored complete already, with its tool calls: their results follow (even past Stop or
      // the round limit, so that no stored call is left without its result).
      options.on({ type: "stored", rows: [answer.row] });
      if (answer.toolCalls.length === 0) return;
      await storeResults(options, answer.toolCalls);
      if (round >= maxRounds) return;
      if (options.signal?.aborted) throw new InterruptedReply("stopped", "", false);
      continue;
    }
    if (options.signal?.aborted) throw new InterruptedReply("stopped", answer.text, false);
    if (answer.toolCalls.length === 0 || round >= maxRounds) {
      const stored = await client.append({
        conversationId,
        messages: [{ role: "assistant", content: answer.text }],
      });
      options.on({ type: "stored", rows: stored.messages });
      return;
    }
    const rows: Message[] = [{ role: "assistant", content: answer.text === "" ? null : answer.text, toolCalls: answer.toolCalls }];
    for (const call of answer.toolCalls) rows.push(await toolRow(options, call));
    // Stopped while the tools ran: the round is not stored (a call is stored with its results
    // or not at all).
    if (options.signal?.aborted) throw new InterruptedReply("stopped", "", false);
    const stored = await client.append({ conversationId, messages: rows });
    options.on({ type: "stored", rows: stored.messages });
  }
}

async function toolRow(options: TurnOptions, call: ToolCall): Promise<Message> {
  return { role: "tool", toolCallId: call.id, name: call.name, content: await options.runTool(call) };
}

/** Runs the calls of a stored reply and appends their results. */
async function storeResults(options: TurnOptions, calls: ToolCall[]): Promise<void> {
  const rows: Message[] = [];
  for (const call of calls) rows.push(await toolRow(options, call));
  const stored = await options.client.append({ conversationId: options.conversationId, messages: rows });
  options.on({ type: "stored", rows: stored.messages });
}
