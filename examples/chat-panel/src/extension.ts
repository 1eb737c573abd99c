/**
 * The VS Code side of the sample chat panel: starts the history server through the shim, shows
 * the conversations in an activity-bar view, and runs the chat webview. Every rule about what the
 * panel shows lives in ./state (pure); this file only wires events to it.
 */

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import * as vscode from "vscode";
import type { ChatHistoryClient, ConversationInfo, ToolCall, TrimmedNotification } from "chat-history-client";
import { startChatHistoryServer, type ChatHistoryServer } from "chat-history-client/vscode";
import { runTurn, type TurnEvent } from "./chat";
import { MODEL_KINDS, type ModelKind, type ModelSettings } from "./providers";
import * as S from "./state";
import { READ_FILE_TOOL, readWorkspaceFile } from "./tools";

const SECTION = "chatPanel";

let server: ChatHistoryServer | undefined;
let starting: Promise<ChatHistoryServer> | undefined;

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

/**
 * Conversation titles, until the server keeps them (protocol version 2: `updateConversation`,
 * automatic titles). Kept in a JSON file in the extension's global storage folder, on the
 * extension host's disk next to the history database (conversation ids are unique, so one map
 * serves every workspace). Not `workspaceState`: under code-server that lives in the browser's
 * storage, and the workspace storage folder's name changes with the server's address.
 */
class Titles {
  private readonly file: string;
  private titles: Record<string, string> = {};

  constructor(context: vscode.ExtensionContext) {
    const folder = context.globalStorageUri.fsPath;
    this.file = join(folder, "titles.json");
    try {
      const value: unknown = JSON.parse(readFileSync(this.file, "utf8"));
      if (typeof value === "object" && value !== null) this.titles = value as Record<string, string>;
    } catch {
      // No titles yet.
    }
  }

  get(id: string): string | undefined {
    const title = this.titles[id];
    return typeof title === "string" ? title : undefined;
  }

  async set(id: string, title: string | undefined): Promise<void> {
    if (title === undefined) delete this.titles[id];
    else this.titles[id] = title;
    await mkdir(dirname(this.file), { recursive: true });
    const temp = `${this.file}.${process.pid}.tmp`;
    await writeFile(temp, JSON.stringify(this.titles), { mode: 0o600 });
    await rename(temp, this.file);
  }
}

class ConversationItem extends vscode.TreeItem {
  constructor(
    readonly info: ConversationInfo,
    title: string,
  ) {
    super(title, vscode.TreeItemCollapsibleState.None);
    this.id = info.conversationId;
    this.description = `${info.messageCount} messages · ${new Date(info.lastActivity).toLocaleString()}`;
    this.tooltip = `${title}\n${info.conversationId}\n${info.messageCount} messages, ~${info.tokens} tokens`;
    this.contextValue = "conversation";
    this.iconPath = new vscode.ThemeIcon("comment-discussion");
    this.command = { command: "chatPanel.openConversation", title: "Open", arguments: [info.conversationId] };
  }
}

class ConversationsView implements vscode.TreeDataProvider<ConversationItem> {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  constructor(
    private readonly client: () => Promise<ChatHistoryClient>,
    private readonly titles: Titles,
  ) {}
  refresh(): void {
    this.changed.fire();
  }
  getTreeItem(item: ConversationItem): vscode.TreeItem {
    return item;
  }
  async getChildren(): Promise<ConversationItem[]> {
    try {
      const { conversations } = await (await this.client()).listConversations({});
      return conversations.map((c) => new ConversationItem(c, this.titles.get(c.conversationId) ?? c.conversationId));
    } catch (error) {
      void vscode.window.showErrorMessage(`Chat history: ${(error as Error).message}`);
      return [];
    }
  }
}

type FromWebview =
  | { type: "ready" }
  | { type: "send"; text: string }
  | { type: "loadOlder" }
  | { type: "dismiss"; id: number }
  | { type: "action"; action: string; key: string }
  | { type: "openLink"; href: string }
  | { type: "newChat" };

class ChatPanel {
  private panel: vscode.WebviewPanel | undefined;
  private state: S.PanelState = S.emptyState(newConversationId());
  private postTimer: NodeJS.Timeout | undefined;
  private reloadAfterTurn = false;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly client: () => Promise<ChatHistoryClient>,
    private readonly protocolVersion: () => number,
    private readonly titles: Titles,
    private readonly list: ConversationsView,
  ) {}

  get conversationId(): string {
    return this.state.conversationId;
  }

  private pageSize(): number {
    return Math.max(1, config().get<number>("pageSize", 50));
  }

  private ensurePanel(): vscode.WebviewPanel {
    if (this.panel) {
      this.panel.reveal();
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
  <div id="title"></div>
  <div id="meter" hidden><div id="meter-bar"><div id="meter-fill"></div></div><span id="meter-label"></span><span id="meter-detail"></span></div>
</header>
<div id="notices" role="status" aria-live="polite"></div>
<main id="messages" aria-live="polite"></main>
<form id="composer">
  <textarea id="prompt" rows="3" placeholder="Ask about your workspace… (Enter to send, Shift+Enter for a new line)" aria-label="Prompt"></textarea>
  <div id="composer-bar"><span id="status"></span><button id="send" type="submit">Send</button></div>
</form>
<script nonce="${n}" src="${script}"></script>
</body>
</html>`;
  }

  private update(next: S.PanelState): void {
    this.state = next;
    if (this.postTimer !== undefined) return;
    // Streaming deltas arrive fast: post at most every 30 ms.
    this.postTimer = setTimeout(() => {
      this.postTimer = undefined;
      void this.panel?.webview.postMessage({ type: "view", view: S.viewOf(this.state, this.protocolVersion()) });
    }, 30);
  }

  private fail(error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    this.update(S.addNotice(S.turnFinished(S.streamDiscarded(this.state)), "error", message));
  }

  /** Shows the panel with the conversation it had (a new chat the first time). */
  reveal(): void {
    this.ensurePanel();
    this.update(this.state);
  }

  /** Opens a conversation (a new one without an id): newest page first. */
  async open(conversationId?: string): Promise<void> {
    this.ensurePanel();
    const id = conversationId ?? newConversationId();
    const title = (conversationId && this.titles.get(conversationId)) || (conversationId ?? "New chat");
    this.state = S.emptyState(id, title);
    if (this.panel) this.panel.title = title;
    if (conversationId !== undefined) await this.loadNewest();
    this.update(this.state);
  }

  private async loadNewest(): Promise<void> {
    const id = this.state.conversationId;
    const page = await (await this.client()).get({ conversationId: id, limit: this.pageSize() });
    if (id === this.state.conversationId) this.update(S.pageLoaded(this.state, page, false));
  }

  private async loadOlder(): Promise<void> {
    if (!S.shouldLoadOlder(this.state)) return;
    const id = this.state.conversationId;
    const beforeId = S.oldestId(this.state)!;
    this.update(S.olderRequested(this.state));
    const page = await (await this.client()).get({ conversationId: id, limit: this.pageSize(), beforeId });
    if (id === this.state.conversationId) this.update(S.pageLoaded(this.state, page, true));
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

  private async send(text: string): Promise<void> {
    if (this.state.busy || text.trim() === "") return;
    const conversationId = this.state.conversationId;
    const firstPrompt = this.state.messages.length === 0 && this.titles.get(conversationId) === undefined;
    this.update(S.promptSent(this.state, text));
    if (firstPrompt) {
      const title = S.titleFromPrompt(text);
      await this.titles.set(conversationId, title);
      this.update({ ...this.state, title });
      if (this.panel) this.panel.title = title;
    }
    const c = config();
    const model = await modelSettings(this.context);
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const on = (event: TurnEvent) => {
      if (conversationId !== this.state.conversationId) return;
      switch (event.type) {
        case "prepared":
          return this.update(S.prepared(this.state, event.request));
        case "streamStart":
          return this.update(S.streamStarted(this.state));
        case "delta":
          return this.update(S.streamDelta(this.state, event.text));
        case "streamEnd":
          return this.update(S.streamEnded(this.state, event.toolCalls));
        case "streamDiscarded":
          return this.update(S.streamDiscarded(this.state));
        case "stored":
          this.list.refresh();
          return this.update(S.rowsStored(this.state, event.rows));
        case "usage":
          // Protocol version 2 adds `reportUsage` (calibration): report `promptTokens` here.
          return this.update(S.usageReported(this.state, event.promptTokens));
        case "retry":
          return this.update(S.addNotice(this.state, "info", "The model said the request was too long; trying once more with a shorter history."));
      }
    };
    try {
      await runTurn(
        {
          client: await this.client(),
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
        },
        text,
      );
      if (conversationId === this.state.conversationId) this.update(S.turnFinished(this.state));
    } catch (error) {
      if (conversationId === this.state.conversationId) this.fail(error);
    }
    if (this.reloadAfterTurn) {
      this.reloadAfterTurn = false;
      await this.loadNewest();
    }
  }

  private async onMessage(message: FromWebview): Promise<void> {
    switch (message.type) {
      case "ready":
        return this.update(this.state);
      case "send":
        return this.send(String(message.text));
      case "loadOlder":
        return this.loadOlder();
      case "dismiss":
        return this.update(S.dismissNotice(this.state, message.id));
      case "newChat":
        return this.open();
      case "openLink": {
        // The webview only sends links that passed safeHref; check again here, where it counts.
        const uri = vscode.Uri.parse(String(message.href), true);
        if (["http", "https", "mailto"].includes(uri.scheme)) await vscode.env.openExternal(uri);
        return;
      }
      case "action": {
        const target = this.state.messages.find((m) => m.key === message.key);
        if (target === undefined) return;
        // The message-action bar: edit and resend, regenerate, fork, redact and delete exchange
        // plug in here (see S.MESSAGE_ACTIONS) once the server has protocol version 2.
        if (message.action === "copy") await vscode.env.clipboard.writeText(target.content);
        return;
      }
    }
  }

  /** The conversation was deleted: the panel starts a new chat if it showed it. */
  async deleted(conversationId: string): Promise<void> {
    if (this.panel && this.state.conversationId === conversationId) await this.open();
  }
}

async function startServer(context: vscode.ExtensionContext): Promise<ChatHistoryServer> {
  const pythonPath = config().get<string>("pythonPath", "") || "python3";
  const output = vscode.window.createOutputChannel("Chat History Server", { log: true });
  context.subscriptions.push(output);
  return startChatHistoryServer(context, { pythonPath, clientOptions: { outputChannel: output } });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const titles = new Titles(context);
  const client = async (): Promise<ChatHistoryClient> => {
    if (server) return server.client;
    starting ??= startServer(context).then(
      (s) => {
        server = s;
        s.client.onTrimmed((event) => panel.onTrimmed(event));
        return s;
      },
      (error) => {
        starting = undefined;
        void vscode.window.showErrorMessage(`Chat history server: ${(error as Error).message}`);
        throw error;
      },
    );
    return (await starting).client;
  };
  const protocolVersion = (): number => {
    const caps = server?.languageClient.initializeResult?.capabilities as
      | { experimental?: { chatHistory?: { protocolVersion?: number } } }
      | undefined;
    return caps?.experimental?.chatHistory?.protocolVersion ?? 1;
  };
  const list = new ConversationsView(client, titles);
  const panel = new ChatPanel(context, client, protocolVersion, titles, list);

  context.subscriptions.push(
    vscode.window.registerTreeDataProvider("chatPanel.conversations", list),
    vscode.commands.registerCommand("chatPanel.show", () => panel.reveal()),
    vscode.commands.registerCommand("chatPanel.newChat", () => panel.open()),
    vscode.commands.registerCommand("chatPanel.openConversation", (id: string) => panel.open(id)),
    vscode.commands.registerCommand("chatPanel.refresh", () => list.refresh()),
    vscode.commands.registerCommand("chatPanel.deleteConversation", async (item?: ConversationItem) => {
      const id = item?.info.conversationId ?? panel.conversationId;
      const title = titles.get(id) ?? id;
      const answer = await vscode.window.showWarningMessage(
        `Delete the conversation "${title}" for good?`,
        { modal: true, detail: "Its messages and summary are removed from the history database." },
        "Delete",
      );
      if (answer !== "Delete") return;
      await (await client()).clear({ conversationId: id });
      await titles.set(id, undefined);
      list.refresh();
      await panel.deleted(id);
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
  // Start the server now, so that the list fills and the first prompt does not wait for it.
  void client().then(() => list.refresh(), () => undefined);
}

export async function deactivate(): Promise<void> {
  await server?.dispose();
  server = undefined;
  starting = undefined;
}
