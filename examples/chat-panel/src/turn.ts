/**
 * A turn of the panel: a prompt sent and its reply streamed (./chat's runTurn, its events applied
 * to the panel's state), Stop, an interrupted reply kept or continued, and the compaction a turn
 * proposes, carried out after it.
 */

import * as vscode from "vscode";
import { ChatHistoryError, ConnectionClosedError } from "chat-history-client";
import type { ChatHistoryClient, CompactionProposal, StoredMessage, ToolCall } from "chat-history-client";
import { InterruptedReply, runTurn, settleCutReply, summarize, type TurnEvent } from "./chat";
import { config, modelSettings, newConversationId, type PanelHost } from "./host";
import * as R from "./replies";
import * as S from "./state";
import * as T from "./stream";
import { READ_FILE_TOOL, readWorkspaceFile } from "./tools";

export class Turn {
  /** Stops the running turn (Stop). */
  private running: AbortController | undefined;
  /** Settles once the running turn's reply is stored as far as it got (or failed). */
  private stored: Promise<void> | undefined;
  private readonly compactions = new Set<string>();

  constructor(private readonly host: PanelHost) {}

  /** Stop: the running turn is aborted (its reply is kept as far as it got). */
  stop(): void {
    this.running?.abort();
  }

  /**
   * The window is going away (the extension's deactivate): the running reply stops as Stop does,
   * which stores what arrived and was shown but not yet sent (the updates go at most 4 times a
   * second) and ends its row interrupted. Resolves once that is stored, or after `boundMs`.
   */
  async closing(boundMs = 2_000): Promise<void> {
    const stored = this.stored;
    if (stored === undefined) return;
    this.stop();
    await Promise.race([stored, new Promise((resolve) => setTimeout(resolve, boundMs))]);
  }

  /** Version 4 (advertised, or the replies methods answer): replies are stored while they stream. */
  private async storesReplies(client: ChatHistoryClient): Promise<boolean> {
    if (this.host.protocolVersion() >= 4) return true;
    let known = this.repliesKnown.get(client);
    if (known === undefined) {
      // An update of no reply: -32601 from a server without the methods, else "no such row".
      known = client.updateReply({ conversationId: newConversationId(), id: 1 }).then(
        () => true,
        (error: unknown) => !(error instanceof ChatHistoryError && error.code === -32601),
      );
      this.repliesKnown.set(client, known);
    }
    return known;
  }
  private readonly repliesKnown = new WeakMap<ChatHistoryClient, Promise<boolean>>();

  /** Cut replies kept as they are, per conversation (their offer is not shown again). */
  keptCuts(): Record<string, number> {
    return this.host.context.workspaceState.get<Record<string, number>>("chatPanel.keptCuts", {});
  }

  /** Keep: the cut reply stays as it is stored. */
  async keepCut(): Promise<void> {
    const cut = R.cutReply(this.host.state);
    if (cut === null) return;
    const id = cut.reply.id!;
    this.host.update(R.cutKept(this.host.state, id));
    await this.host.context.workspaceState.update("chatPanel.keptCuts", { ...this.keptCuts(), [this.host.state.conversationId]: id });
  }

  /** Continue: the model carries on from the cut reply, streamed into the same bubble and row. */
  async continueCut(): Promise<void> {
    const cut = R.cutReply(this.host.state);
    if (cut === null) return;
    await this.send("", true, cut.reply.id!);
  }

  /**
   * Runs a turn for `text` (`promptStored`: its prompt is the conversation's newest row; with
   * `continueId`, Continue of that cut reply; with `begun`, version 5's Regenerate: the streaming
   * row begun after the prompt, a new branch, that the reply streams into).
   */
  async send(text: string, promptStored = false, continueId?: number, begun?: StoredMessage): Promise<void> {
    const host = this.host;
    if (begun !== undefined && (host.state.busy || host.state.elsewhere !== null)) {
      // Not run after all: the branch begun for it goes (the reply it would replace shows again).
      await (await host.client()).endReply({ conversationId: host.state.conversationId, id: begun.id, status: "discard" }).catch(() => undefined);
      return;
    }
    if (host.state.busy || (text.trim() === "" && continueId === undefined)) return;
    if (host.state.elsewhere !== null) {
      host.update(S.addNotice(host.state, "info", "Nothing was sent: this chat belongs to another workspace. Continue it in this workspace to reply."));
      return;
    }
    // The prompt of a failed turn typed again is a Retry: it is stored once, not twice in a row.
    if (!promptStored && T.isRetryOf(host.state, text)) promptStored = true;
    const conversationId = host.state.conversationId;
    if (continueId !== undefined) host.update(R.continueStarted(host.state, continueId));
    else {
      const started = T.retryStarted(host.state);
      host.update(promptStored ? started : T.promptSent(started, text));
    }
    const running = new AbortController();
    this.running = running;
    let stored!: () => void;
    this.stored = new Promise((resolve) => (stored = resolve));
    const starts = host.serverStarts();
    const c = config();
    let proposal: CompactionProposal | null = null;
    const model = await modelSettings(host.context);
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const on = (event: TurnEvent) => {
      if (conversationId !== host.state.conversationId) return;
      switch (event.type) {
        case "prepared":
          proposal = event.request.compaction ?? null;
          return host.update(S.prepared(host.state, event.request));
        case "calibrated":
          return host.update(S.calibrated(host.state, event.calibration));
        case "streamStart":
          return host.update(T.streamStarted(host.state));
        case "replyBegun":
          return host.update(R.replyBegun(host.state, event.row));
        case "delta":
          return host.update(T.streamDelta(host.state, event.text));
        case "streamEnd":
          return host.update(T.streamEnded(host.state, event.toolCalls));
        case "streamDiscarded":
          return host.update(T.streamDiscarded(host.state));
        case "interrupted":
          return host.update(T.streamInterrupted(host.state, event.partial));
        case "stored":
          void host.list.refresh();
          return host.update(T.rowsStored(host.state, event.rows));
        case "usage":
          return host.update(S.usageReported(host.state, event.promptTokens, event.cachedTokens));
        case "retry":
          if (event.kind === "providerState") {
            return host.update(S.addNotice(host.state, "info", S.providerStateRetryText(event.reason), S.RETRY_NOTICE));
          }
          return host.update(S.addNotice(host.state, "info", "The model said the request was too long; trying once more with a shorter history."));
      }
    };
    try {
      const client = await host.client();
      await runTurn(
        {
          client,
          storeReplies: await this.storesReplies(client),
          conversationId,
          model,
          historyProvider: c.get<string>("historyProvider", "") || model.kind,
          tools: [READ_FILE_TOOL],
          runTool: (call: ToolCall) =>
            call.name === READ_FILE_TOOL.name
              ? readWorkspaceFile(folders, call.arguments)
              : Promise.resolve(`Error: unknown tool ${call.name}.`),
          fetch,
          on,
          signal: running.signal,
        },
        text,
        { promptStored, ...(continueId === undefined ? {} : { continueId }), ...(begun === undefined ? {} : { begun }) },
      );
      // The proposal is carried out after the reply, in the background (the panel is free).
      if (proposal !== null) void this.compact(conversationId, proposal);
      if (conversationId === host.state.conversationId) host.update(T.turnSucceeded(host.state));
    } catch (error) {
      if (error instanceof InterruptedReply && error.unsettled !== null) {
        // The history server stopped mid-reply (or refused its end): the row is ended now, as
        // stored, whichever chat is shown.
        const stopped = error.unsettled.error instanceof ConnectionClosedError || host.serverStarts() !== starts;
        await this.settle(conversationId, error.unsettled, stopped, model.model);
      } else if (conversationId !== host.state.conversationId) {
        // Another chat is shown now.
      } else if (begun !== undefined && !(error instanceof InterruptedReply && error.stored !== null)) {
        // A Regenerate's new reply that showed nothing was discarded: the reply it would have
        // replaced is the conversation's again, and shows.
        await host.reload(false, true).catch(() => undefined);
        host.update(S.addNotice(T.turnFinished(host.state), "error", `${turnFailureWords(error)} The earlier reply is shown again: Regenerate to try once more.`, S.TURN_NOTICE));
      } else if (error instanceof InterruptedReply && error.stored !== null) {
        // Stored as far as it got: Continue, Retry and Keep are offered for it.
        host.update(R.cutStored(T.turnFinished(host.state), error.reason));
      } else if (continueId !== undefined) {
        // The continued row is as the server left it (interrupted: the offer stands again).
        await host.reload(true).catch(() => undefined);
        host.update(S.addNotice(T.turnFinished(host.state), "error", turnFailureWords(error), S.TURN_NOTICE));
      } else {
        const partial = error instanceof InterruptedReply ? error.partial : "";
        const shown = error instanceof InterruptedReply ? T.streamInterrupted(host.state, partial) : T.streamDiscarded(host.state);
        host.update(T.turnFailed(shown, text, turnFailureWords(error)));
      }
    } finally {
      if (this.running === running) {
        this.running = undefined;
        this.stored = undefined;
      }
      stored();
    }
    await host.afterTurn();
  }

  /**
   * A reply whose end could not be stored (`stopped`: its history server stopped; the language
   * client starts a new one, which the requests here wait for): ended now as interrupted, as far
   * as it was stored (./chat's settleCutReply), rather than when the dead server's lease expires,
   * and shown as stored with the offer of a cut reply (Continue, Retry, Keep).
   */
  private async settle(conversationId: string, unsettled: { rowId: number; error: unknown }, stopped: boolean, model: string): Promise<void> {
    const host = this.host;
    const mine = () => conversationId === host.state.conversationId;
    const why = stopped ? R.SERVER_STOPPED : `Storing the reply failed (${errorText(unsettled.error)})`;
    if (mine()) host.update(R.replyUnsettled(host.state, `${why}${stopped ? "; it is being restarted" : ""}. Saving what it stored…`));
    let row: StoredMessage | null;
    try {
      row = await settleWhileRestarting(() => host.client().then((client) => settleCutReply(client, conversationId, unsettled.rowId, { model })));
    } catch (error) {
      if (mine()) {
        const words = stopped
          ? `${R.SERVER_STOPPED} and could not be restarted (${errorText(error)}). What it stored is kept: reload the window to see it.`
          : `${why}, and so did ending it (${errorText(error)}). What was stored is kept.`;
        host.update(S.addNotice(T.turnFinished(S.dropNotice(host.state, S.TURN_NOTICE)), "error", words, S.TURN_NOTICE));
      }
      return;
    }
    if (!mine()) return;
    await host.reload(true).catch(() => undefined);
    const words = `${why}${stopped ? " and was restarted" : ""}.`;
    if (row !== null && row.status === "interrupted") return host.update(R.cutStored(T.turnFinished(host.state), words));
    // Not ended here: gone (a reply without text is deleted), or no longer the newest row (another
    // window wrote after it), where it stands until the dead server's lease ends.
    const stands = host.state.messages.some((m) => m.id === unsettled.rowId);
    const after = stands ? "What it stored stays, and shows as interrupted within 30 s." : "Nothing of the reply is stored.";
    host.update(S.addNotice(T.turnFinished(S.dropNotice(host.state, S.TURN_NOTICE)), "error", `${words} ${after}`, S.TURN_NOTICE));
  }

  /** Keep: the interrupted reply's text is stored as the turn's reply, as it is. */
  async keepPartial(): Promise<void> {
    const offer = this.host.state.retry;
    if (offer === null || offer.partial === "" || this.host.state.busy) return;
    const conversationId = this.host.state.conversationId;
    const stored = await (await this.host.client()).append({ conversationId, messages: [{ role: "assistant", content: offer.partial }] });
    if (conversationId !== this.host.state.conversationId) return;
    this.host.update(T.partialKept(this.host.state, stored.messages));
    void this.host.list.refresh();
  }

  /**
   * Carries out a compaction proposal in the background: the proposed request goes to the model
   * (no tools, answer not shown), its reply is saved as the summary covering `throughId`.
   */
  private async compact(conversationId: string, proposal: CompactionProposal): Promise<void> {
    if (this.compactions.has(conversationId)) return;
    this.compactions.add(conversationId);
    const host = this.host;
    const mine = () => conversationId === host.state.conversationId;
    if (mine()) host.update(S.compacting(host.state, true));
    try {
      const summary = await summarize({ model: await modelSettings(host.context), fetch }, proposal);
      const saved = await (await host.client()).saveSummary({ conversationId, summary, coversThroughId: proposal.throughId });
      if (mine()) host.update(S.summaryShown(host.state, { coversThroughId: saved.coversThroughId, turns: proposal.coveredTurns }));
    } catch (error) {
      if (mine()) host.update(S.addNotice(S.compacting(host.state, false), "error", `Summarizing earlier turns failed: ${(error as Error).message}`));
    } finally {
      this.compactions.delete(conversationId);
    }
  }
}

/**
 * Runs `settle` until the restarted history server answers it: a request sent while the language
 * client has not yet seen the old server go fails as the connection did; a few more tries, within
 * `boundMs`, reach the new one.
 */
async function settleWhileRestarting<T>(settle: () => Promise<T>, boundMs = 15_000): Promise<T> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    try {
      return await settle();
    } catch (error) {
      if (!(error instanceof ConnectionClosedError) || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A failed turn in words a person can act on (never a library's bare word like "terminated"). */
function turnFailureWords(error: unknown): string {
  if (error instanceof InterruptedReply) return error.message;
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof ConnectionClosedError) return `The chat history server stopped before it answered (${message}); it restarts on its own: try again.`;
  if (error instanceof Error && error.name === "ModelRequestError") return message;
  if (typeof (error as { code?: unknown })?.code === "number") return `The chat history server refused the turn: ${message}`;
  return `The turn failed: ${message}`;
}
