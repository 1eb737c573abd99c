/**
 * The chat webview panel: its lifecycle, the conversation it shows (one {@link S.PanelState},
 * posted to the page as it changes), loading pages, and what the page and the server's
 * notifications ask of it. A turn is ./turn's, the message actions ./actions'.
 */

import * as vscode from "vscode";
import type { ChangedNotification, ChatHistoryClient, TrimmedNotification } from "chat-history-client";
import { MessageActions } from "./actions";
import { config, newConversationId, type PanelHost } from "./host";
import * as I from "./imports";
import type { ConversationsView } from "./list";
import { pageHtml, type FromWebview } from "./page";
import * as R from "./replies";
import * as S from "./state";
import * as T from "./stream";
import { Turn } from "./turn";
import * as V from "./view";
import * as W from "./workspaces";

export class ChatPanel implements PanelHost {
  private panel: vscode.WebviewPanel | undefined;
  /** The conversation shown; changed only through {@link update} (and when another is opened). */
  state: S.PanelState = S.emptyState(newConversationId());
  private postTimer: NodeJS.Timeout | undefined;
  private reloadAfterTurn = false;
  private readonly turn = new Turn(this);
  private readonly actions = new MessageActions(this, this.turn);

  constructor(
    readonly context: vscode.ExtensionContext,
    readonly client: () => Promise<ChatHistoryClient>,
    readonly protocolVersion: () => number,
    readonly serverStarts: () => number,
    readonly list: ConversationsView,
  ) {}

  get conversationId(): string {
    return this.state.conversationId;
  }

  /** The chat shown belongs to another workspace (read-only here). */
  get elsewhere(): S.Elsewhere | null {
    return this.state.elsewhere;
  }

  private pageSize(): number {
    return Math.max(1, config().get<number>("pageSize", 50));
  }

  /** The panel, shown (and focused unless `preserveFocus`: the page then takes the focus itself). */
  private ensurePanel(preserveFocus = false): vscode.WebviewPanel {
    if (this.panel) {
      this.panel.reveal(undefined, preserveFocus);
      return this.panel;
    }
    const panel = vscode.window.createWebviewPanel("chatPanel.chat", "Chat", vscode.ViewColumn.Active, {
      enableScripts: true,
      retainContextWhenHidden: true,
      localResourceRoots: [vscode.Uri.joinPath(this.context.extensionUri, "dist"), vscode.Uri.joinPath(this.context.extensionUri, "media")],
    });
    panel.iconPath = vscode.Uri.joinPath(this.context.extensionUri, "media", "chat.svg");
    panel.webview.html = pageHtml(panel.webview, this.context.extensionUri);
    panel.webview.onDidReceiveMessage((m: FromWebview) => void this.onMessage(m).catch((e) => this.fail(e)));
    panel.onDidDispose(() => (this.panel = undefined));
    this.panel = panel;
    return panel;
  }

  update(next: S.PanelState): void {
    this.state = next;
    this.watchStreaming();
    if (this.postTimer !== undefined) return;
    // Streaming deltas arrive fast: post at most every 30 ms.
    this.postTimer = setTimeout(() => {
      this.postTimer = undefined;
      void this.panel?.webview.postMessage({ type: "view", view: V.viewOf(this.state, this.protocolVersion()) });
    }, 30);
  }

  private streamingTimer: NodeJS.Timeout | undefined;

  /**
   * A streaming row this window is not writing (another window's, or one whose writer was
   * killed): re-read every 2 s until none streams. Another window's reply is also announced
   * (`changed` "reply"), but a reply whose writer died is interrupted by this window's own
   * server (its lease expired, within 30 s), and a server does not announce its own changes.
   */
  private watchStreaming(): void {
    if (this.streamingTimer !== undefined || this.state.busy || !R.othersStreaming(this.state)) return;
    this.streamingTimer = setTimeout(() => {
      this.streamingTimer = undefined;
      if (!this.state.busy && R.othersStreaming(this.state)) void this.reload(true).catch(() => undefined);
    }, 2000);
  }

  private fail(error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    this.update(S.addNotice(T.turnFinished(T.streamDiscarded(this.state)), "error", message));
  }

  /**
   * The open conversation as stored now (after another window changed it, or a stale rewind was
   * refused): the rows from the oldest one shown on, replacing them in place, with its title and
   * summary.
   */
  async reload(rowsOnly = false, whole = false): Promise<void> {
    const id = this.state.conversationId;
    const shown = this.state.messages.filter((m) => m.id !== null).length;
    // Enough to reach back to the oldest row shown, with room for what was added since.
    const page = await (await this.client()).get({ ...S.keyOf(this.state), limit: Math.min(10_000, shown + this.pageSize()) });
    if (id !== this.state.conversationId) return;
    this.update(whole ? S.branchShown(this.state, page) : S.reloaded(this.state, page));
    if (rowsOnly) return;
    await this.refreshTitle().catch(() => undefined);
    await this.loadSummary().catch(() => undefined);
  }

  /** Another window or the CLI changed a conversation of this workspace (chatHistory/changed). */
  onChanged(event: ChangedNotification): void {
    if (event.conversationId !== this.state.conversationId || this.state.elsewhere !== null) {
      void this.list.refresh();
      return;
    }
    if (this.state.busy) this.reloadAfterTurn = true;
    // Version 5: another window switched branch (or began one above the end): the active path
    // as stored now replaces the rows shown.
    else if (event.reason === "branch") void this.reload(false, true).catch((e) => this.fail(e));
    // A reply growing in another window (at most twice a second): its rows only.
    else void this.reload(event.reason === "reply").catch((e) => this.fail(e));
  }

  onTrimmed(event: TrimmedNotification): void {
    if (event.scope === "storage") void this.list.refresh();
    if (event.conversationId !== this.state.conversationId) return;
    this.update(S.trimmed(this.state, event));
    // Rows deleted for good leave the panel too: reload the newest page once no turn is running.
    if (event.scope === "storage") {
      if (this.state.busy) this.reloadAfterTurn = true;
      else void this.loadNewest().catch((e) => this.fail(e));
    }
  }

  async afterTurn(): Promise<void> {
    if (this.reloadAfterTurn) {
      this.reloadAfterTurn = false;
      await this.reload().catch((e) => this.fail(e));
    }
    // The automatic title is the first stored prompt's: it appears with the first prompt and
    // changes when retention deletes that turn. The list and the panel follow the server.
    await this.refreshTitle().catch(() => undefined);
  }

  /** Shows the panel with the conversation it had (a new chat the first time). */
  reveal(): void {
    this.ensurePanel();
    this.update(this.state);
  }

  /**
   * Opens a conversation (a new one without an id): newest page first; with `focusId` (a search
   * hit), older pages until the one holding that row. With `elsewhere`, a conversation of another
   * workspace, read-only (titled `title`, as the list showed it).
   */
  async open(conversationId?: string, focusId?: number, elsewhere: S.Elsewhere | null = null, title?: string, preserveFocus = false): Promise<void> {
    this.ensurePanel(preserveFocus);
    const id = conversationId ?? newConversationId();
    const search = this.state.search;
    const shownTitle = title ?? S.titleOf(conversationId ? this.list.infos.get(conversationId) : undefined);
    const source = conversationId === undefined ? null : I.importedFrom(this.list.infos.get(conversationId));
    this.state = { ...S.emptyState(id, shownTitle, conversationId === undefined ? null : elsewhere), search, keptCut: this.turn.keptCuts()[id] ?? null, source };
    this.setTitle(this.state.title);
    if (conversationId !== undefined) {
      await this.loadNewest();
      if (focusId !== undefined) {
        for (let pages = 0; pages < 50 && !S.isLoaded(this.state, focusId) && this.state.hasMore; pages++) {
          await this.loadOlder();
        }
        this.state = { ...this.state, focusId };
      }
      await this.loadSummary();
    }
    this.update(this.state);
  }

  private setTitle(title: string): void {
    this.state = { ...this.state, title };
    if (this.panel) this.panel.title = title;
  }

  /** The title after a change (the first prompt's automatic title, a rename), from the server. */
  async refreshTitle(): Promise<void> {
    const id = this.state.conversationId;
    await this.list.refresh();
    if (id === this.state.conversationId) {
      this.setTitle(S.titleOf(this.list.infos.get(id)));
      this.update(this.state);
    }
  }

  /** `conversationId` was renamed (the list is loaded again): the panel's title follows if it shows it. */
  retitled(conversationId: string): void {
    if (conversationId === this.state.conversationId) {
      this.setTitle(S.titleOf(this.list.infos.get(conversationId)));
      this.update(this.state);
    }
  }

  private async loadSummary(): Promise<void> {
    if (this.protocolVersion() < 2) return;
    const id = this.state.conversationId;
    const summary = await (await this.client()).getSummary(S.keyOf(this.state));
    if (id !== this.state.conversationId) return;
    this.update(S.summaryShown(this.state, summary === null ? null : { coversThroughId: summary.coversThroughId, turns: null }));
  }

  private async loadNewest(): Promise<void> {
    const id = this.state.conversationId;
    const page = await (await this.client()).get({ ...S.keyOf(this.state), limit: this.pageSize() });
    if (id === this.state.conversationId) this.update(S.pageLoaded(this.state, page, false));
  }

  private async loadOlder(): Promise<void> {
    if (!S.shouldLoadOlder(this.state)) return;
    const id = this.state.conversationId;
    const beforeId = S.oldestId(this.state)!;
    this.update(S.olderRequested(this.state));
    const page = await (await this.client()).get({ ...S.keyOf(this.state), limit: this.pageSize(), beforeId });
    if (id === this.state.conversationId) this.update(S.pageLoaded(this.state, page, true));
  }

  private async search(query: string): Promise<void> {
    if (query.trim() === "") return this.update(S.searchClosed(this.state));
    const [result] = await Promise.all([(await this.client()).search({ query, limit: 30 }), this.list.load()]);
    this.update(S.searchShown(this.state, query, result, this.list.titles()));
  }

  private async onMessage(message: FromWebview): Promise<void> {
    switch (message.type) {
      case "ready":
        return this.update(this.state);
      case "send":
        return this.turn.send(String(message.text));
      case "stop":
        this.turn.stop();
        return;
      case "noticeAction": {
        const offer = this.state.retry;
        if (message.action === "continue" || message.action === "retryCut" || message.action === "keepCut") {
          return this.actions.cutChoice(message.action, message.seenId);
        }
        if (message.action === "keep") return this.turn.keepPartial();
        if (message.action === "retry" && offer !== null) return this.turn.send(offer.prompt, offer.promptId !== null);
        return;
      }
      case "loadOlder":
        return this.loadOlder();
      case "dismiss":
        // Dismissing the offer of a cut reply keeps it as it is.
        if (message.id === R.CUT_NOTICE_ID) return this.actions.cutChoice("keepCut", message.seenId);
        return this.update(S.dismissNotice(this.state, message.id));
      case "newChat":
        return this.newChat();
      case "focusRefused":
        this.panel?.reveal(undefined, false);
        return;
      case "openLink": {
        // The webview only sends links that passed safeHref; check again here, where it counts.
        const uri = vscode.Uri.parse(String(message.href), true);
        if (["http", "https", "mailto"].includes(uri.scheme)) await vscode.env.openExternal(uri);
        return;
      }
      case "action":
        return this.actions.run(String(message.action), Number(message.id), message.seenId);
      case "switchBranch":
        return this.actions.switchBranch(Number(message.id), message.seenId);
      case "search":
        return this.search(String(message.query));
      case "closeSearch":
        return this.update(S.searchClosed(this.state));
      case "openHit":
        // Jumping to a hit closes the results: the conversation is what the person wants now.
        await this.open(String(message.conversationId), Number(message.id));
        return this.update(S.searchClosed(this.state));
      case "undoSummary":
        return this.actions.undoSummary();
      case "continueHere":
        return this.continueHere();
      case "moveHere":
        if (this.state.elsewhere !== null) await vscode.commands.executeCommand("chatPanel.moveWorkspace", this.state.elsewhere.workspace);
        return;
    }
  }

  /**
   * Continue a chat of another workspace: a copy in this workspace (fork with `newWorkspace`),
   * opened ready to reply, whose tools read this workspace's files. The original stays there.
   */
  private async continueHere(): Promise<void> {
    const elsewhere = this.state.elsewhere;
    if (elsewhere === null || this.state.busy) return;
    const to = await this.list.currentWorkspace();
    const source = { conversationId: this.state.conversationId, workspace: elsewhere.workspace };
    const copy = await W.continueHere(await this.client(), source, to, newConversationId());
    await this.list.refresh();
    await this.open(copy.conversationId);
    this.update(S.addNotice(this.state, "info", `Continued here: a copy of the chat from "${elsewhere.name}" (the original stays there).`));
    void this.panel?.webview.postMessage({ type: "focusPrompt" });
  }

  /** `from`'s history moved into this workspace: a chat of it shown read-only is now this workspace's. */
  async movedHere(from: string): Promise<void> {
    if (this.panel && this.state.elsewhere?.workspace === from) await this.open(this.state.conversationId);
  }

  /**
   * New Chat: an empty conversation, with the prompt box focused to type at once. An open panel
   * is shown without VS Code's focus and its page focuses the prompt box itself: VS Code focuses
   * a webview in two moves 50 ms apart (its host page, then the page), and keys typed between them
   * reach neither (the first key or two after a click on +). Should the page not get the focus
   * that way, it says so and VS Code's focus follows ("focusRefused").
   */
  async newChat(): Promise<void> {
    const shown = this.panel !== undefined;
    await this.open(undefined, undefined, null, undefined, shown);
    void this.panel?.webview.postMessage({ type: "focusPrompt", confirm: shown });
  }

  /** The window is going away: the reply in flight stores what it showed (see Turn.closing). */
  closing(): Promise<void> {
    return this.turn.closing();
  }

  /** The conversation was deleted: the panel starts a new chat if it showed it. */
  async deleted(conversationId: string): Promise<void> {
    if (this.panel && this.state.conversationId === conversationId && this.state.elsewhere === null) await this.open();
  }
}
