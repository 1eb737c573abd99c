/**
 * `streamReply`: a provider's reply stored while it streams (protocol.md "Version 4" → Replies
 * in flight). It begins a streaming row, consumes an async iterable of deltas, flushes what
 * arrived with `updateReply` at most `flushesPerSecond` times a second (default 4), and ends
 * the row: "complete" when the iterable ends, "interrupted" when it throws or the signal
 * aborts (the text shown so far is kept), or "discard" when `decide` says so. A flush the
 * server answered is committed: a crash after it keeps that text.
 */

import { ChatHistoryError, type ChatHistoryClient } from "./client";
import type {
  BeginReplyParams,
  EndReplyStatus,
  JsonObject,
  ProviderData,
  PruneReport,
  StoredMessage,
  ToolCall,
} from "./types";

/** One piece of a reply: text to append, and/or the row's tool calls or providerData so far. */
export interface ReplyDelta {
  content?: string;
  /** The reply's tool calls so far (replaces the stored ones; send only complete calls). */
  toolCalls?: ToolCall[];
  providerData?: ProviderData;
}

/** How the stream ended, for `decide`. */
export interface ReplyEnding {
  /** The whole text the helper sent (and the server stored). */
  text: string;
  /** The iterable's error, when it threw. */
  error?: unknown;
  /** Whether `signal` aborted it. */
  aborted: boolean;
}

export interface StreamReplyOptions extends BeginReplyParams {
  /** The reply's deltas: strings (text) or {@link ReplyDelta}s. */
  deltas: AsyncIterable<string | ReplyDelta>;
  /** Flushes a second at most (default 4; the server refuses far more than that). */
  flushesPerSecond?: number;
  /** Stops the stream: the reply ends "interrupted" with what arrived. */
  signal?: AbortSignal;
  /** The row's metadata at its end (e.g. the model, usage). */
  metadata?: JsonObject;
  /**
   * A streaming row the caller began already (`beginReply`, e.g. with version 5's `parentId` for
   * a Regenerate, so that the `prepare` after it reads the new branch): streamed into, not begun
   * again (the begin params are then unused).
   */
  begun?: StoredMessage;
  /** Called with the streaming row once it is stored (its id is the bubble's). */
  onBegin?: (row: StoredMessage) => void;
  /** Called after each committed flush with the stored length (code points). */
  onFlush?: (length: number) => void;
  /**
   * How to end (default: "complete" when the deltas ended, else "interrupted"). Return
   * "discard" to delete the row for good (an empty reply, the user's Discard).
   */
  decide?: (ending: ReplyEnding) => EndReplyStatus | undefined;
}

export interface StreamReplyResult {
  /** "complete", "interrupted" or "discard", as the row ended. */
  status: EndReplyStatus;
  /** The row as stored (null when discarded, or when the server could not be reached to end it). */
  message: StoredMessage | null;
  pruned: PruneReport | null;
  /** The iterable's error or the server's, when the stream did not end on its own. */
  error?: unknown;
}

/**
 * Streams a reply into the store (see the module doc). Never rejects for the iterable's error
 * or an abort: the result says how it ended. Rejects when `beginReply` is refused (e.g.
 * `ReplyInProgressError`, `ConversationChangedError`): then nothing was stored.
 */
export async function streamReply(client: ChatHistoryClient, options: StreamReplyOptions): Promise<StreamReplyResult> {
  const { deltas, flushesPerSecond = 4, signal, metadata, onBegin, onFlush, decide, begun, ...begin } = options;
  if (!(flushesPerSecond > 0)) throw new RangeError("flushesPerSecond must be above 0");
  const key = { conversationId: begin.conversationId, workspace: begin.workspace };
  const row = begun ?? (await client.beginReply(begin));
  onBegin?.(row);
  const flusher = new Flusher(client, { ...key, id: row.id }, 1000 / flushesPerSecond, onFlush);
  let error: unknown;
  let aborted = signal?.aborted ?? false;
  const iterator = deltas[Symbol.asyncIterator]();
  const stop = new Promise<"aborted">((resolve) => {
    if (signal) signal.addEventListener("abort", () => resolve("aborted"), { once: true });
  });
  try {
    while (!aborted && flusher.failure === undefined) {
      const next = await Promise.race([iterator.next(), stop]);
      if (next === "aborted") {
        aborted = true;
        break;
      }
      if (next.done) break;
      flusher.add(typeof next.value === "string" ? { content: next.value } : next.value);
    }
  } catch (thrown) {
    error = thrown;
  }
  if (aborted || error !== undefined) void iterator.return?.().catch(() => undefined);
  await flusher.drain();
  error ??= flusher.failure;
  const fallback: EndReplyStatus = error === undefined && !aborted ? "complete" : "interrupted";
  const status = decide?.({ text: row.content + flusher.sent, error, aborted }) ?? fallback;
  try {
    const ended = await client.endReply({ ...key, id: row.id, status, metadata, ...flusher.fields() });
    return { status, message: ended.message, pruned: ended.pruned, ...(error === undefined ? {} : { error }) };
  } catch (failed) {
    // The server is gone or refused: a server that exits interrupts its replies itself.
    return { status: "interrupted", message: null, pruned: null, error: error ?? failed };
  }
}

/** What waits to be sent, and the one update in flight at a time, at most one per interval. */
class Flusher {
  /** The text the server acknowledged so far. */
  sent = "";
  failure: ChatHistoryError | unknown = undefined;
  private pendingText = "";
  private toolCalls: ToolCall[] | undefined;
  private providerData: ProviderData | undefined;
  private dirtyFields = false;
  private lastFlush = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inFlight: Promise<void> | undefined;

  constructor(
    private readonly client: ChatHistoryClient,
    private readonly row: { conversationId: string; workspace?: string; id: number },
    private readonly intervalMs: number,
    private readonly onFlush?: (length: number) => void,
  ) {}

  add(delta: ReplyDelta): void {
    if (delta.content) this.pendingText += delta.content;
    if (delta.toolCalls !== undefined) {
      this.toolCalls = delta.toolCalls;
      this.dirtyFields = true;
    }
    if (delta.providerData !== undefined) {
      this.providerData = delta.providerData;
      this.dirtyFields = true;
    }
    this.schedule();
  }

  /** The final fields for `endReply`: the tool calls and providerData last given. */
  fields(): { toolCalls?: ToolCall[]; providerData?: ProviderData } {
    return {
      ...(this.toolCalls === undefined ? {} : { toolCalls: this.toolCalls }),
      ...(this.providerData === undefined ? {} : { providerData: this.providerData }),
    };
  }

  /** Sends what waits, now, after the update in flight. */
  async drain(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
    if (this.failure === undefined && (this.pendingText || this.dirtyFields)) await this.flush();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.inFlight !== undefined || this.failure !== undefined) return;
    const wait = Math.max(0, this.lastFlush + this.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, wait);
  }

  private flush(): Promise<void> {
    const text = this.pendingText;
    const fields = this.dirtyFields ? this.fields() : {};
    this.pendingText = "";
    this.dirtyFields = false;
    this.lastFlush = Date.now();
    const sending = this.client
      .updateReply({ ...this.row, ...(text ? { contentDelta: text } : {}), ...fields })
      .then(
        (answer) => {
          this.sent += text;
          this.onFlush?.(answer.length);
        },
        (failed: unknown) => {
          this.failure = failed;
        },
      )
      .finally(() => {
        this.inFlight = undefined;
        if (this.pendingText || this.dirtyFields) this.schedule();
      });
    this.inFlight = sending;
    return sending;
  }
}
