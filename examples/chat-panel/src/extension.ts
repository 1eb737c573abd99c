/**
 * The VS Code side of the sample chat panel: starts the history server through the shim, shows
 * the conversations in an activity-bar view, and runs the chat webview. Every rule about what the
 * panel shows lives in ./state (pure); this file only wires events to it.
 */

import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import { ChatHistoryError, ConversationChangedError, InvalidParamsError } from "chat-history-client";
import type {
  ChangedNotification,
  ChatHistoryClient,
  CompactionProposal,
  ConversationInfo,
  ToolCall,
  TrimmedNotification,
  WorkspaceInfo,
} from "chat-history-client";
import type { ChatHistoryServer } from "chat-history-client/vscode";
import { InterruptedReply, runTurn, summarize, type TurnEvent } from "./chat";
import { copyMcpConfiguration, registerMcpServer } from "./agents";
import { ServerLauncher } from "./launcher";
import { MODEL_KINDS, type ModelKind, type ModelSettings } from "./providers";
import * as R from "./replies";
import * as E from "./edits";
import * as S from "./state";
import * as T from "./stream";
import * as V from "./view";
import * as I from "./imports";
import { READ_FILE_TOOL, readWorkspaceFile } from "./tools";
import * as W from "./workspaces";

const SECTION = "chatPanel";

let server: ChatHistoryServer | undefined;
let starting: Promise<ChatHistoryServer> | undefined;
let launcher: ServerLauncher;
/** The start failed and said so (one notification): the views stay quiet about it. */
let startFailure: unknown;

function config() {
  return vscode.workspace.getConfiguration(SECTION);
}

function apiKeyName(kind: ModelKind): string {
  return `chatPanel.apiKey.${kind}`;
}

async function modelSettings(context: vscode.ExtensionContext): Promise<ModelSettings> {
  const c = config();
  const kind = c.get<string>("provider", "openai") as ModelKind;
  return {
    kind: MODEL_KINDS.includes(kind) ? kind : "openai",
    baseUrl: c.get<string>("baseUrl", ""),
    model: c.get<string>("model", "llama3.2"),
    apiKey: (await context.secrets.get(apiKeyName(kind))) ?? undefined,
    maxOutputTokens: c.get<number>("maxOutputTokens", 4096),
  };
}

function newConversationId(): string {
  return `chat-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
}

function nonce(): string {
  return randomBytes(18).toString("base64url");
}

/** The scheme of an imported conversation's row (`resourceUri`): its badge names the tool. */
const IMPORTED_SCHEME = "chat-panel-imported";

/** An imported conversation's row: the tool's two letters at its end, the tool's name on hover. */
const importedBadges: vscode.FileDecorationProvider = {
  provideFileDecoration(uri) {
    if (uri.scheme !== IMPORTED_SCHEME) return undefined;
    const source = uri.path.replace(/^\//, "");
    return new vscode.FileDecoration(I.sourceBadge(source), `Imported from ${I.sourceLabel(source)}`);
  },
};

/** A conversation in the list: this workspace's, or (under "all workspaces") another's, read-only here. */
class ConversationItem extends vscode.TreeItem {
  constructor(
    readonly info: ConversationInfo,
    readonly elsewhere: S.Elsewhere | null = null,
  ) {
    const title = S.titleOf(info);
    super(title, vscode.TreeItemCollapsibleState.None);
    this.id = elsewhere === null ? info.conversationId : JSON.stringify([elsewhere.workspace, info.conversationId]);
    const source = I.importedFrom(info);
    const when = `${S.plural(info.messageCount, "message")} · ${new Date(info.lastActivity ?? info.createdAt ?? 0).toLocaleString()}`;
    this.description = source === null ? when : `${source} · ${when}`;
    const from = source === null ? "" : `\nImported from ${source}`;
    this.tooltip = `${title}\n${info.conversationId}\n${S.plural(info.messageCount, "message")}, ~${S.plural(info.tokens, "token")}${from}`;
    // An imported conversation's tool: a badge at the row's end (the description can be cut off).
    const tool = I.importedSource(info);
    if (tool !== null) this.resourceUri = vscode.Uri.from({ scheme: IMPORTED_SCHEME, path: `/${tool}` });
    this.contextValue = elsewhere === null ? "conversation" : "otherConversation";
    this.iconPath = new vscode.ThemeIcon("comment-discussion");
    this.command = { command: "chatPanel.openConversation", title: "Open", arguments: [info.conversationId, elsewhere, title] };
  }
}

/** A workspace under "all workspaces": this one first (expanded), then the others with their conversations. */
class WorkspaceItem extends vscode.TreeItem {
  constructor(
    readonly info: WorkspaceInfo,
    readonly current: boolean,
  ) {
    super(W.workspaceName(info), current ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
    this.id = `workspace:${info.workspace}`;
    this.description = W.workspaceDescription(info, current);
    this.tooltip = W.workspaceTooltip(info);
    this.contextValue = current ? "currentWorkspace" : "otherWorkspace";
    this.iconPath = new vscode.ThemeIcon(current ? "root-folder-opened" : info.folderExists === false ? "warning" : "folder");
  }
}

type ListNode = WorkspaceItem | ConversationItem;

/**
 * The activity-bar list. Titles are the server's (listConversations: the title set with
 * updateConversation, else the automatic one from the first prompt): the panel keeps no second
 * store of them.
 */
class ConversationsView implements vscode.TreeDataProvider<ListNode> {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  /** The last listing, by conversation id (titles for the panel and for search hits). */
  readonly infos = new Map<string, ConversationInfo>();
  /** The server answered a version-2 listing (titles), whatever version it advertises. */
  v2 = false;
  /** "All workspaces": every workspace of the database, each with its conversations (else this workspace's only). */
  allWorkspaces = false;
  /** The session's workspace identity, once asked. */
  private current: Promise<string> | undefined;
  constructor(private readonly client: () => Promise<ChatHistoryClient>) {}
  refresh(): void {
    this.changed.fire();
  }
  getTreeItem(item: ListNode): vscode.TreeItem {
    return item;
  }
  /** This window's workspace identity as the server keys it. */
  currentWorkspace(): Promise<string> {
    this.current ??= this.client().then(W.sessionWorkspace);
    this.current.catch(() => (this.current = undefined));
    return this.current;
  }
  async workspaces(): Promise<WorkspaceInfo[]> {
    return (await (await this.client()).listWorkspaces()).workspaces;
  }
  async load(): Promise<ConversationInfo[]> {
    const conversations = await W.conversationsOf(await this.client(), undefined);
    this.infos.clear();
    for (const c of conversations) {
      this.infos.set(c.conversationId, c);
      if ("titleSource" in c) this.v2 = true;
    }
    return conversations;
  }
  titles(): Map<string, string> {
    return new Map([...this.infos].map(([id, info]) => [id, S.titleOf(info)]));
  }
  async getChildren(node?: ListNode): Promise<ListNode[]> {
    try {
      if (node instanceof ConversationItem) return [];
      if (!this.allWorkspaces || (node !== undefined && node.current)) return (await this.load()).map((c) => new ConversationItem(c));
      if (node === undefined) {
        const current = await this.currentWorkspace();
        return W.workspaceGroups(await this.workspaces(), current).map((w) => new WorkspaceItem(w, w.workspace === current));
      }
      const elsewhere = { workspace: node.info.workspace, name: W.workspaceName(node.info) };
      return (await W.conversationsOf(await this.client(), node.info.workspace)).map((c) => new ConversationItem(c, elsewhere));
    } catch (error) {
      if (error !== startFailure) void vscode.window.showErrorMessage(`Chat history: ${(error as Error).message}`);
      return [];
    }
  }
}

type FromWebview =
  | { type: "ready" }
  | { type: "send"; text: string }
  | { type: "stop" }
  | { type: "noticeAction"; action: string }
  | { type: "loadOlder" }
  | { type: "dismiss"; id: number }
  /** `seenId`: the newest stored row the webview had drawn when the person clicked. */
  | { type: "action"; action: string; key: string; seenId?: number | null }
  | { type: "openLink"; href: string }
  | { type: "newChat" }
  /** The page could not take the focus itself (after a "focusPrompt" that asked it to confirm). */
  | { type: "focusRefused" }
  | { type: "search"; query: string }
  | { type: "closeSearch" }
  | { type: "openHit"; conversationId: string; id: number }
  | { type: "undoSummary" }
  | { type: "continueHere" }
  | { type: "moveHere" };

class ChatPanel {
  private panel: vscode.WebviewPanel | undefined;
  private state: S.PanelState = S.emptyState(newConversationId());
  private postTimer: NodeJS.Timeout | undefined;
  private reloadAfterTurn = false;
  /** Stops the running turn (Stop). */
  private running: AbortController | undefined;
  private readonly compactions = new Set<string>();

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly client: () => Promise<ChatHistoryClient>,
    private readonly protocolVersion: () => number,
    private readonly list: ConversationsView,
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
    panel.webview.html = this.html(panel.webview);
    panel.webview.onDidReceiveMessage((m: FromWebview) => void this.onMessage(m).catch((e) => this.fail(e)));
    panel.onDidDispose(() => (this.panel = undefined));
    this.panel = panel;
    return panel;
  }

  private html(webview: vscode.Webview): string {
    const n = nonce();
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.context.extensionUri, "dist", "webview.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.context.extensionUri, "media", "panel.css"));
    // Nothing runs or loads but our own nonce'd script and stylesheet: no inline handlers, no
    // remote or data: images, no frames, no form posts, no network from the page.
    const csp = [
      "default-src 'none'",
      `script-src 'nonce-${n}'`,
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource}`,
      `font-src ${webview.cspSource}`,
      "connect-src 'none'",
      "form-action 'none'",
      "frame-src 'none'",
      "base-uri 'none'",
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Chat</title>
</head>
<body>
<header id="header">
  <div id="title-row"><div id="title"></div><span id="source" hidden></span><form id="search-form" role="search"><input id="search" type="search" placeholder="Search all conversations" aria-label="Search conversations"></form></div>
  <div id="meter" hidden><div id="meter-bar"><div id="meter-fill"></div></div><span id="meter-label"></span><span id="meter-detail"></span></div>
</header>
<div id="search-results" hidden></div>
<div id="summary" hidden><span id="summary-text"></span><button id="undo-summary" type="button">Undo</button></div>
<div id="elsewhere" hidden><span id="elsewhere-text"></span><span id="elsewhere-actions"><button id="continue-here" type="button">Continue in this workspace</button><button id="move-here" type="button">Move that workspace's history here…</button></span></div>
<div id="notices" role="status" aria-live="polite"></div>
<main id="messages" aria-live="polite"></main>
<form id="composer">
  <textarea id="prompt" rows="3" placeholder="Ask about your workspace… (Enter to send, Shift+Enter for a new line)" aria-label="Prompt"></textarea>
  <div id="composer-bar"><span id="status"></span><button id="stop" type="button" hidden>Stop</button><button id="send" type="submit">Send</button></div>
</form>
<script nonce="${n}" src="${script}"></script>
</body>
</html>`;
  }

  private update(next: S.PanelState): void {
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
  private async reload(rowsOnly = false): Promise<void> {
    const id = this.state.conversationId;
    const shown = this.state.messages.filter((m) => m.id !== null).length;
    // Enough to reach back to the oldest row shown, with room for what was added since.
    const page = await (await this.client()).get({ ...S.keyOf(this.state), limit: Math.min(10_000, shown + this.pageSize()) });
    if (id !== this.state.conversationId) return;
    this.update(S.reloaded(this.state, page));
    if (rowsOnly) return;
    await this.refreshTitle().catch(() => undefined);
    await this.loadSummary().catch(() => undefined);
  }

  /** A rewind from a stale view was refused (1003): nothing was deleted; show what is stored. */
  private async changedElsewhere(): Promise<void> {
    await this.reload();
    this.update(
      S.addNotice(
        this.state,
        "info",
        "This chat changed in another window, so nothing was changed here. It now shows the latest messages: try again if you still want to.",
        S.CHANGED_NOTICE,
      ),
    );
  }

  /** Another window or the CLI changed a conversation of this workspace (chatHistory/changed). */
  onChanged(event: ChangedNotification): void {
    if (event.conversationId !== this.state.conversationId || this.state.elsewhere !== null) {
      void this.list.load().then(() => this.list.refresh(), () => undefined);
      return;
    }
    if (this.state.busy) this.reloadAfterTurn = true;
    // A reply growing in another window (at most twice a second): its rows only.
    else void this.reload(event.reason === "reply").catch((e) => this.fail(e));
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
    this.state = { ...S.emptyState(id, shownTitle, conversationId === undefined ? null : elsewhere), search, keptCut: this.keptCuts()[id] ?? null, source };
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
  private async refreshTitle(): Promise<void> {
    const id = this.state.conversationId;
    await this.list.load();
    this.list.refresh();
    if (id === this.state.conversationId) {
      this.setTitle(S.titleOf(this.list.infos.get(id)));
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

  /** The server takes `expectedLastId` (version 3); one from before refuses the field. */
  private expectedLastIdKnown = true;

  /**
   * A rewind (truncate, deleteTurns, editMessage) made only while the newest stored row is the
   * one the person saw when they clicked (`expectedLastId`: `seenId`, from what the webview
   * drew). Undefined when the view was stale: the server changed nothing (1003), and the panel
   * reloads and says so. A server from before version 3 gets the request without the field.
   */
  private async guarded<T>(seenId: unknown, run: (expected: { expectedLastId?: number | null }) => Promise<T>): Promise<T | undefined> {
    try {
      return await run(this.expectedLastIdKnown ? { expectedLastId: S.expectedLastId(this.state, seenId) } : {});
    } catch (error) {
      if (error instanceof ConversationChangedError) {
        await this.changedElsewhere();
        return undefined;
      }
      if (this.expectedLastIdKnown && error instanceof InvalidParamsError && error.message.includes("expectedLastId")) {
        this.expectedLastIdKnown = false;
        return run({});
      }
      throw error;
    }
  }

  onTrimmed(event: TrimmedNotification): void {
    if (event.scope === "storage") this.list.refresh();
    if (event.conversationId !== this.state.conversationId) return;
    this.update(S.trimmed(this.state, event));
    // Rows deleted for good leave the panel too: reload the newest page once no turn is running.
    if (event.scope === "storage") {
      if (this.state.busy) this.reloadAfterTurn = true;
      else void this.loadNewest().catch((e) => this.fail(e));
    }
  }

  /** Version 4 (advertised, or the replies methods answer): replies are stored while they stream. */
  private async storesReplies(client: ChatHistoryClient): Promise<boolean> {
    if (this.protocolVersion() >= 4) return true;
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
  private keptCuts(): Record<string, number> {
    return this.context.workspaceState.get<Record<string, number>>("chatPanel.keptCuts", {});
  }

  /** Keep: the cut reply stays as it is stored. */
  private async keepCut(): Promise<void> {
    const cut = R.cutReply(this.state);
    if (cut === null) return;
    const id = cut.reply.id!;
    this.update(R.cutKept(this.state, id));
    await this.context.workspaceState.update("chatPanel.keptCuts", { ...this.keptCuts(), [this.state.conversationId]: id });
  }

  /** Retry of a cut reply: it goes (`truncate` from it), and its prompt is answered again. */
  private async retryCut(): Promise<void> {
    const cut = R.cutReply(this.state);
    if (cut === null || cut.prompt === null) return;
    const { conversationId } = this.state;
    const fromId = cut.reply.id!;
    const client = await this.client();
    const done = await this.guarded(undefined, (expected) => client.truncate({ conversationId, fromId, ...expected }));
    if (done === undefined) return;
    this.update(E.truncated(this.state, fromId));
    await this.send(cut.prompt.content, true);
  }

  /** Continue: the model carries on from the cut reply, streamed into the same bubble and row. */
  private async continueCut(): Promise<void> {
    const cut = R.cutReply(this.state);
    if (cut === null) return;
    await this.send("", true, cut.reply.id!);
  }

  private async send(text: string, promptStored = false, continueId?: number): Promise<void> {
    if (this.state.busy || (text.trim() === "" && continueId === undefined)) return;
    if (this.state.elsewhere !== null) {
      this.update(S.addNotice(this.state, "info", "Nothing was sent: this chat belongs to another workspace. Continue it in this workspace to reply."));
      return;
    }
    // The prompt of a failed turn typed again is a Retry: it is stored once, not twice in a row.
    if (!promptStored && T.isRetryOf(this.state, text)) promptStored = true;
    const conversationId = this.state.conversationId;
    if (continueId !== undefined) this.update(R.continueStarted(this.state, continueId));
    else {
      const started = T.retryStarted(this.state);
      this.update(promptStored ? started : T.promptSent(started, text));
    }
    const running = new AbortController();
    this.running = running;
    const c = config();
    let proposal: CompactionProposal | null = null;
    const model = await modelSettings(this.context);
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const on = (event: TurnEvent) => {
      if (conversationId !== this.state.conversationId) return;
      switch (event.type) {
        case "prepared":
          proposal = event.request.compaction ?? null;
          return this.update(S.prepared(this.state, event.request));
        case "calibrated":
          return this.update(S.calibrated(this.state, event.calibration));
        case "streamStart":
          return this.update(T.streamStarted(this.state));
        case "replyBegun":
          return this.update(R.replyBegun(this.state, event.row));
        case "delta":
          return this.update(T.streamDelta(this.state, event.text));
        case "streamEnd":
          return this.update(T.streamEnded(this.state, event.toolCalls));
        case "streamDiscarded":
          return this.update(T.streamDiscarded(this.state));
        case "interrupted":
          return this.update(T.streamInterrupted(this.state, event.partial));
        case "stored":
          this.list.refresh();
          return this.update(T.rowsStored(this.state, event.rows));
        case "usage":
          return this.update(S.usageReported(this.state, event.promptTokens, event.cachedTokens));
        case "retry":
          return this.update(S.addNotice(this.state, "info", "The model said the request was too long; trying once more with a shorter history."));
      }
    };
    try {
      const client = await this.client();
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
        { promptStored, ...(continueId === undefined ? {} : { continueId }) },
      );
      // The proposal is carried out after the reply, in the background (the panel is free).
      if (proposal !== null) void this.compact(conversationId, proposal);
      if (conversationId === this.state.conversationId) this.update(T.turnSucceeded(this.state));
    } catch (error) {
      if (conversationId !== this.state.conversationId) {
        // Another chat is shown now.
      } else if (error instanceof InterruptedReply && error.stored !== null) {
        // Stored as far as it got: Continue, Retry and Keep are offered for it.
        this.update(R.cutStored(T.turnFinished(this.state), error.reason));
      } else if (continueId !== undefined) {
        // The continued row is as the server left it (interrupted: the offer stands again).
        await this.reload(true).catch(() => undefined);
        this.update(S.addNotice(T.turnFinished(this.state), "error", turnFailureWords(error), S.TURN_NOTICE));
      } else {
        const partial = error instanceof InterruptedReply ? error.partial : "";
        const shown = error instanceof InterruptedReply ? T.streamInterrupted(this.state, partial) : T.streamDiscarded(this.state);
        this.update(T.turnFailed(shown, text, turnFailureWords(error)));
      }
    } finally {
      if (this.running === running) this.running = undefined;
    }
    if (this.reloadAfterTurn) {
      this.reloadAfterTurn = false;
      await this.reload().catch((e) => this.fail(e));
    }
    // The automatic title is the first stored prompt's: it appears with the first prompt and
    // changes when retention deletes that turn. The list and the panel follow the server.
    await this.refreshTitle().catch(() => undefined);
  }

  /** Keep: the interrupted reply's text is stored as the turn's reply, as it is. */
  private async keepPartial(): Promise<void> {
    const offer = this.state.retry;
    if (offer === null || offer.partial === "" || this.state.busy) return;
    const conversationId = this.state.conversationId;
    const stored = await (await this.client()).append({ conversationId, messages: [{ role: "assistant", content: offer.partial }] });
    if (conversationId !== this.state.conversationId) return;
    this.update(T.partialKept(this.state, stored.messages));
    this.list.refresh();
  }

  /**
   * Carries out a compaction proposal in the background: the proposed request goes to the model
   * (no tools, answer not shown), its reply is saved as the summary covering `throughId`.
   */
  private async compact(conversationId: string, proposal: CompactionProposal): Promise<void> {
    if (this.compactions.has(conversationId)) return;
    this.compactions.add(conversationId);
    const mine = () => conversationId === this.state.conversationId;
    if (mine()) this.update(S.compacting(this.state, true));
    try {
      const summary = await summarize({ model: await modelSettings(this.context), fetch }, proposal);
      const saved = await (await this.client()).saveSummary({ conversationId, summary, coversThroughId: proposal.throughId });
      if (mine()) this.update(S.summaryShown(this.state, { coversThroughId: saved.coversThroughId, turns: proposal.coveredTurns }));
    } catch (error) {
      if (mine()) this.update(S.addNotice(S.compacting(this.state, false), "error", `Summarizing earlier turns failed: ${(error as Error).message}`));
    } finally {
      this.compactions.delete(conversationId);
    }
  }

  /** Undo of "earlier turns summarized": the summary goes, the turns are sent again. */
  private async undoSummary(): Promise<void> {
    const conversationId = this.state.conversationId;
    await (await this.client()).deleteSummary({ conversationId });
    if (conversationId === this.state.conversationId) {
      this.update(S.addNotice(S.summaryShown(this.state, null), "info", "Summary removed: the earlier turns are sent again (as far as the budget allows)."));
    }
  }

  private async search(query: string): Promise<void> {
    if (query.trim() === "") return this.update(S.searchClosed(this.state));
    const [result] = await Promise.all([(await this.client()).search({ query, limit: 30 }), this.list.load()]);
    this.update(S.searchShown(this.state, query, result, this.list.titles()));
  }

  /** Rename: the title goes to the server (updateConversation); empty goes back to the automatic one. */
  async rename(conversationId: string): Promise<void> {
    const info = this.list.infos.get(conversationId);
    const title = await vscode.window.showInputBox({
      title: "Rename conversation",
      prompt: "Empty: back to the automatic title (the first prompt).",
      value: info?.titleSource === "user" ? (info.title ?? "") : "",
      placeHolder: S.titleOf(info),
    });
    if (title === undefined) return;
    await (await this.client()).updateConversation({ conversationId, title: title.trim() === "" ? null : title.trim() });
    await this.list.load();
    this.list.refresh();
    if (conversationId === this.state.conversationId) {
      this.setTitle(S.titleOf(this.list.infos.get(conversationId)));
      this.update(this.state);
    }
  }

  /** Export: Markdown (every row, from `get`), or the CLI's JSONL (`python -m chat_history.cli export`). */
  async export(conversationId: string): Promise<void> {
    const pick = await vscode.window.showQuickPick(
      [
        { label: "Markdown", format: "md" as const },
        { label: "JSONL (chat-history CLI export)", format: "jsonl" as const },
      ],
      { title: "Export conversation" },
    );
    if (pick === undefined) return;
    let content: string;
    let language: string;
    if (pick.format === "md") {
      const { messages } = await (await this.client()).get({ conversationId });
      content = V.toMarkdown(S.titleOf(this.list.infos.get(conversationId)), messages);
      language = "markdown";
    } else {
      content = await launcher.cli([...launcher.storageArgs(this.context.globalStorageUri.fsPath), "export", conversationId]);
      language = "jsonl";
    }
    const doc = await vscode.workspace.openTextDocument({ content, language });
    await vscode.window.showTextDocument(doc, { preview: false });
  }

  private async rewind(key: string, kind: "edit" | "regenerate", seenId: unknown): Promise<void> {
    if (this.state.busy) return;
    const target = this.state.messages.find((m) => m.key === key);
    if (target === undefined) return;
    let text = "";
    if (kind === "edit") {
      const edited = await vscode.window.showInputBox({
        title: "Edit and resend",
        prompt: "This prompt and everything after it are replaced; the model answers the new one.",
        value: target.content,
      });
      if (edited === undefined || edited.trim() === "") return;
      text = edited;
    }
    const rewind = E.rewindFor(this.state, key, kind, text);
    if (rewind === null) return;
    const conversationId = this.state.conversationId;
    const client = await this.client();
    const done = await this.guarded(seenId, (expected) => client.truncate({ conversationId, fromId: rewind.fromId, ...expected }));
    if (done === undefined) return;
    this.update(E.truncated(this.state, rewind.fromId));
    await this.send(rewind.prompt, rewind.promptStored);
  }

  private async messageAction(action: string, key: string, seenId: unknown): Promise<void> {
    const target = this.state.messages.find((m) => m.key === key);
    if (target === undefined) return;
    // Another workspace's chat is read-only here: only what changes nothing.
    if (this.state.elsewhere !== null && !V.READ_ONLY_ACTIONS.includes(action)) return;
    const conversationId = this.state.conversationId;
    const client = await this.client();
    switch (action) {
      case "copy":
        return vscode.env.clipboard.writeText(target.content);
      case "edit":
      case "regenerate":
        return this.rewind(key, action, seenId);
      case "deleteExchange": {
        if (target.turn === null || this.state.busy) return;
        const turn = target.turn;
        const done = await this.guarded(seenId, (expected) => client.deleteTurns({ conversationId, turns: [turn], ...expected }));
        if (done === undefined) return;
        this.update(E.turnsDeleted(this.state, [target.turn]));
        // The first turn's prompt is the automatic title: the panel's tab and the list follow.
        await this.refreshTitle();
        return;
      }
      case "redact": {
        if (target.id === null) return;
        const secret = await vscode.window.showInputBox({
          title: "Redact",
          prompt: 'The text to replace with "[redacted]" everywhere in this message; empty: the whole message.',
          password: true,
        });
        if (secret === undefined) return;
        const content = E.redact(target.content, secret);
        if (content === null) {
          void vscode.window.showInformationMessage("That text is not in this message; nothing changed.");
          return;
        }
        const id = target.id;
        const row = await this.guarded(seenId, (expected) => client.editMessage({ conversationId, id, content, ...expected }));
        if (row === undefined) return;
        this.update(E.rowEdited(this.state, row));
        // A redacted first prompt is the automatic title: header, tab and list show it redacted.
        await this.refreshTitle();
        return;
      }
      case "fork": {
        if (target.id === null) return;
        const forkId = newConversationId();
        await client.fork({ conversationId, newConversationId: forkId, throughId: target.id });
        await this.list.load();
        this.list.refresh();
        await this.open(forkId);
        return;
      }
    }
  }

  private async onMessage(message: FromWebview): Promise<void> {
    switch (message.type) {
      case "ready":
        return this.update(this.state);
      case "send":
        return this.send(String(message.text));
      case "stop":
        this.running?.abort();
        return;
      case "noticeAction": {
        const offer = this.state.retry;
        if (message.action === "continue") return this.continueCut();
        if (message.action === "retryCut") return this.retryCut();
        if (message.action === "keepCut") return this.keepCut();
        if (message.action === "keep") return this.keepPartial();
        if (message.action === "retry" && offer !== null) return this.send(offer.prompt, offer.promptId !== null);
        return;
      }
      case "loadOlder":
        return this.loadOlder();
      case "dismiss":
        // Dismissing the offer of a cut reply keeps it as it is.
        if (message.id === R.CUT_NOTICE_ID) return this.keepCut();
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
        return this.messageAction(String(message.action), String(message.key), message.seenId);
      case "search":
        return this.search(String(message.query));
      case "closeSearch":
        return this.update(S.searchClosed(this.state));
      case "openHit":
        // Jumping to a hit closes the results: the conversation is what the person wants now.
        await this.open(String(message.conversationId), Number(message.id));
        return this.update(S.searchClosed(this.state));
      case "undoSummary":
        return this.undoSummary();
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
    await this.list.load();
    this.list.refresh();
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

  /** The conversation was deleted: the panel starts a new chat if it showed it. */
  async deleted(conversationId: string): Promise<void> {
    if (this.panel && this.state.conversationId === conversationId && this.state.elsewhere === null) await this.open();
  }
}

/** A failed turn in words a person can act on (never a library's bare word like "terminated"). */
function turnFailureWords(error: unknown): string {
  if (error instanceof InterruptedReply) return error.message;
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof Error && error.name === "ModelRequestError") return message;
  if (typeof (error as { code?: unknown })?.code === "number") return `The chat history server refused the turn: ${message}`;
  return `The turn failed: ${message}`;
}

/**
 * The conversation a list or palette command acts on: the item's, else the panel's, unless the
 * panel shows another workspace's chat (read-only here: those commands act on this workspace's).
 */
function ownConversation(item: ConversationItem | undefined): string | undefined {
  if (item !== undefined) return item.elsewhere === null ? item.info.conversationId : undefined;
  if (chatPanel?.elsewhere) {
    void vscode.window.showInformationMessage(`The chat shown belongs to the workspace "${chatPanel.elsewhere.name}": continue it in this workspace first.`);
    return undefined;
  }
  return chatPanel?.conversationId;
}
let chatPanel: ChatPanel | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  launcher = new ServerLauncher(context);
  const client = async (): Promise<ChatHistoryClient> => {
    if (server) return server.client;
    starting ??= launcher.start().then(
      (s) => {
        server = s;
        s.client.onTrimmed((event) => panel.onTrimmed(event));
        s.client.onChanged((event) => panel.onChanged(event));
        return s;
      },
      (error) => {
        starting = undefined;
        startFailure = error;
        void launcher.reportFailure(error);
        throw error;
      },
    );
    return (await starting).client;
  };
  const protocolVersion = (): number => {
    const caps = server?.languageClient.initializeResult?.capabilities as
      | { experimental?: { chatHistory?: { protocolVersion?: number } } }
      | undefined;
    const advertised = caps?.experimental?.chatHistory?.protocolVersion ?? 1;
    // A server with the version-2 methods that still advertises 1 answers listConversations
    // with titles: that counts as version 2.
    return Math.max(advertised, list.v2 ? 2 : 1);
  };
  const list = new ConversationsView(client);
  registerMcpServer(context, launcher);
  const panel = new ChatPanel(context, client, protocolVersion, list);
  chatPanel = panel;
  const tree = vscode.window.createTreeView("chatPanel.conversations", { treeDataProvider: list });

  /** "All workspaces" in the list, or this workspace's conversations only (kept per workspace). */
  const showAllWorkspaces = async (all: boolean): Promise<void> => {
    list.allWorkspaces = all;
    tree.description = all ? "All workspaces" : undefined;
    await vscode.commands.executeCommand("setContext", "chatPanel.allWorkspaces", all);
    await context.workspaceState.update("chatPanel.allWorkspaces", all);
    list.refresh();
  };
  void showAllWorkspaces(context.workspaceState.get<boolean>("chatPanel.allWorkspaces", false));

  /** Moves `info`'s history into this workspace (moveWorkspace) and says what happened. */
  const moveHere = async (info: WorkspaceInfo): Promise<void> => {
    const to = await list.currentWorkspace();
    const outcome = await W.moveHistory(await client(), info, to);
    await list.load().catch(() => undefined);
    list.refresh();
    if (!outcome.ok) {
      // A refusal the person just asked for: told in full (a modal), not in a toast cut to one line.
      await vscode.window.showErrorMessage(outcome.text, { modal: true, detail: outcome.detail });
      return;
    }
    void vscode.window.showInformationMessage(outcome.text);
    await panel.movedHere(info.workspace);
  };
  /** Workspaces whose folder no longer exists, offered once each per window (a notification with Move Here). */
  const asked = new Set<string>();
  const offerMoves = async (): Promise<void> => {
    if (protocolVersion() < 3) return;
    const offers = W.moveOffers(await list.workspaces(), await list.currentWorkspace(), asked);
    for (const info of offers) {
      asked.add(info.workspace);
      const answer = await vscode.window.showInformationMessage(W.offerText(info), "Move Here", "Not Now");
      if (answer === "Move Here") await moveHere(info);
    }
  };
  const quiet = (error: unknown) => {
    if (error !== startFailure) void vscode.window.showErrorMessage(`Chat history: ${(error as Error).message}`);
  };
  /** The palette's "Move History from Another Workspace…" (a QuickPick), or a workspace of the list or the panel: confirmed, then moved. */
  const moveWorkspace = async (target?: WorkspaceItem | string): Promise<void> => {
    const current = await list.currentWorkspace();
    const others = (await list.workspaces()).filter((w) => w.workspace !== current);
    let info: WorkspaceInfo | undefined;
    if (target instanceof WorkspaceItem) info = target.info;
    else if (typeof target === "string") info = others.find((w) => w.workspace === target);
    else {
      if (others.length === 0) {
        void vscode.window.showInformationMessage("No other workspace has chat history in this database.");
        return;
      }
      const pick = await vscode.window.showQuickPick(
        others.map((w) => ({ label: W.workspaceName(w), description: W.workspaceDescription(w, false), detail: w.folder ?? w.workspace, info: w })),
        { title: "Move history from another workspace into this one", placeHolder: "The workspace whose conversations move here", matchOnDetail: true },
      );
      info = pick?.info;
    }
    if (info === undefined) {
      if (typeof target === "string") void vscode.window.showInformationMessage("That workspace has no conversations any more.");
      return;
    }
    const confirm = W.confirmText(info);
    const answer = await vscode.window.showWarningMessage(confirm.message, { modal: true, detail: confirm.detail }, "Move");
    if (answer === "Move") await moveHere(info);
  };

  /**
   * Import History…: a dry run per source for this folder, a QuickPick of the tools that have
   * something (with counts), the chosen one's preview in a modal (what retention deletes at the
   * next read included), then the import and the list refreshed.
   */
  const importHistory = async (): Promise<void> => {
    const c = await client();
    const { found, failed } = await vscode.window.withProgress(
      { location: { viewId: "chatPanel.conversations" }, title: "Looking for other tools' history of this folder…" },
      () => I.findSources(c),
    );
    if (found.length === 0) {
      const why = I.failedText(failed);
      void vscode.window.showInformationMessage(`No history of another tool was found for this folder.${why === "" ? "" : ` ${why}`}`);
      return;
    }
    const items = [
      ...found.map((f) => ({ ...I.sourceItem(f), found: f })),
      ...failed.map((f) => ({ label: `$(warning) ${I.sourceLabel(f.source)}`, description: "cannot be read", detail: f.error, found: undefined })),
    ];
    const pick = await vscode.window.showQuickPick(items, {
      title: "Import history from another tool",
      placeHolder: "The tool whose conversations of this folder to import (nothing is written until you confirm)",
    });
    if (pick === undefined) return;
    if (pick.found === undefined) {
      void vscode.window.showErrorMessage(`${pick.label.replace("$(warning) ", "")}: ${pick.detail}`);
      return;
    }
    const settings = vscode.workspace.getConfiguration("chatHistory");
    const preview = I.previewOf(pick.found, {
      maxAgeHours: settings.get<number>("maxAgeHours", 720),
      maxMessages: settings.get<number>("maxMessages", 50),
      maxTokens: settings.get<number>("maxTokens", 32000),
    });
    if (preview.confirm === null) {
      void vscode.window.showInformationMessage(preview.message, { detail: preview.detail });
      return;
    }
    const keep = "Open Retention Settings";
    // Retention would delete some of it: the safe choice is the default one.
    const buttons = preview.expiring > 0 ? [keep, preview.confirm] : [preview.confirm];
    const answer = await vscode.window.showWarningMessage(preview.message, { modal: true, detail: preview.detail }, ...buttons);
    if (answer === keep) {
      await vscode.commands.executeCommand("workbench.action.openSettings", "chatHistory.maxAgeHours");
      return;
    }
    if (answer !== preview.confirm) return;
    const done = await c.importFrom({ source: pick.found.source, dryRun: false });
    await list.load().catch(() => undefined);
    list.refresh();
    void vscode.window.showInformationMessage(I.importedText(pick.found.source, done.conversations));
  };

  context.subscriptions.push(
    tree,
    vscode.window.registerFileDecorationProvider(importedBadges),
    vscode.commands.registerCommand("chatPanel.importHistory", () => importHistory().catch(quiet)),
    vscode.commands.registerCommand("chatPanel.show", () => panel.reveal()),
    vscode.commands.registerCommand("chatPanel.newChat", () => panel.newChat()),
    vscode.commands.registerCommand("chatPanel.openConversation", (id: string, elsewhere?: S.Elsewhere | null, title?: string) =>
      panel.open(id, undefined, elsewhere ?? null, title),
    ),
    vscode.commands.registerCommand("chatPanel.refresh", () => {
      list.refresh();
      void offerMoves().catch(quiet);
    }),
    vscode.commands.registerCommand("chatPanel.copyMcpConfiguration", () =>
      copyMcpConfiguration(context, launcher).catch((error) => launcher.reportFailure(error)),
    ),
    vscode.commands.registerCommand("chatPanel.showAllWorkspaces", () => showAllWorkspaces(true)),
    vscode.commands.registerCommand("chatPanel.showThisWorkspace", () => showAllWorkspaces(false)),
    vscode.commands.registerCommand("chatPanel.moveWorkspace", (target?: WorkspaceItem | string) => moveWorkspace(target).catch(quiet)),
    vscode.commands.registerCommand("chatPanel.moveWorkspaceHere", (target?: WorkspaceItem | string) => moveWorkspace(target).catch(quiet)),
    vscode.commands.registerCommand("chatPanel.deleteConversation", async (item?: ConversationItem) => {
      const id = ownConversation(item);
      if (id === undefined) return;
      const title = S.titleOf(list.infos.get(id));
      const answer = await vscode.window.showWarningMessage(
        `Delete the conversation "${title}" for good?`,
        { modal: true, detail: "Its messages and summary are removed from the history database." },
        "Delete",
      );
      if (answer !== "Delete") return;
      await (await client()).clear({ conversationId: id });
      list.refresh();
      await panel.deleted(id);
    }),
    vscode.commands.registerCommand("chatPanel.renameConversation", async (item?: ConversationItem) => {
      const id = ownConversation(item);
      if (id !== undefined) await panel.rename(id);
    }),
    vscode.commands.registerCommand("chatPanel.exportConversation", async (item?: ConversationItem) => {
      const id = ownConversation(item);
      if (id !== undefined) await panel.export(id);
    }),
    vscode.commands.registerCommand("chatPanel.setApiKey", async () => {
      const kind = (await modelSettings(context)).kind;
      const key = await vscode.window.showInputBox({
        title: `API key for the ${kind} provider`,
        prompt: "Stored in VS Code's secret storage, never in settings or in the chat history. Leave empty to remove it.",
        password: true,
        ignoreFocusOut: true,
      });
      if (key === undefined) return;
      if (key === "") await context.secrets.delete(apiKeyName(kind));
      else await context.secrets.store(apiKeyName(kind), key);
    }),
  );
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((event) => {
      // A Python chosen after a failed start (Select Python…): try again at once.
      if (event.affectsConfiguration("chatPanel.pythonPath") && !server) list.refresh();
      if (event.affectsConfiguration("chatPanel.database")) {
        if (server) void launcher.offerReload();
        else list.refresh();
      }
    }),
  );
  // Start the server now, so that the list fills and the first prompt does not wait for it; then
  // offer to move the history of workspaces whose folder is gone.
  void client().then(
    () => {
      list.refresh();
      void offerMoves().catch(quiet);
    },
    () => undefined,
  );
}

export async function deactivate(): Promise<void> {
  await server?.dispose();
  server = undefined;
  starting = undefined;
}
