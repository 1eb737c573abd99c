/**
 * The activity-bar list of conversations: this workspace's, or under "all workspaces" every
 * workspace of the database with its conversations; an imported conversation's badge.
 */

import * as vscode from "vscode";
import type { ChatHistoryClient, ConversationInfo, WorkspaceInfo } from "chat-history-client";
import * as I from "./imports";
import * as S from "./state";
import * as W from "./workspaces";

/** The scheme of an imported conversation's row (`resourceUri`): its badge names the tool. */
const IMPORTED_SCHEME = "chat-panel-imported";

/** An imported conversation's row: the tool's two letters at its end, the tool's name on hover. */
export const importedBadges: vscode.FileDecorationProvider = {
  provideFileDecoration(uri) {
    if (uri.scheme !== IMPORTED_SCHEME) return undefined;
    const source = uri.path.replace(/^\//, "");
    return new vscode.FileDecoration(I.sourceBadge(source), `Imported from ${I.sourceLabel(source)}`);
  },
};

/** A conversation in the list: this workspace's, or (under "all workspaces") another's, read-only here. */
export class ConversationItem extends vscode.TreeItem {
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
export class WorkspaceItem extends vscode.TreeItem {
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

export type ListNode = WorkspaceItem | ConversationItem;

/**
 * The activity-bar list. Titles are the server's (listConversations: the title set with
 * updateConversation, else the automatic one from the first prompt): the panel keeps no second
 * store of them.
 */
export class ConversationsView implements vscode.TreeDataProvider<ListNode> {
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
  constructor(
    private readonly client: () => Promise<ChatHistoryClient>,
    /** Says what went wrong, unless it is the server's failed start (already said once). */
    private readonly quiet: (error: unknown) => void,
  ) {}
  /** What the list last drew of this workspace's conversations (null: the next refresh redraws). */
  private drawn: string | null = null;
  /**
   * Reads the listing (`infos`, current once this settles; it never fails) and redraws the list
   * when what it shows changed. A redraw disposes the rows' click commands (VS Code: "command
   * not found"), so a row clicked before the new rows are drawn opens nothing: the panel's own
   * refreshes (after every turn, every title read) redraw only on a change.
   */
  async refresh(): Promise<void> {
    // A first draw under way (a window's list waits for its server): redrawn now, the rows it is
    // about to show would lose their commands as they appear. Compared once they are drawn.
    if (this.drawing !== undefined) await this.drawing;
    let conversations: ConversationInfo[];
    try {
      conversations = await this.load();
    } catch {
      return this.redraw();
    }
    if (this.allWorkspaces) this.redraw();
    else if (JSON.stringify(conversations) !== this.drawn) this.redraw(conversations);
  }
  /**
   * Redraws the list whatever it shows; with `listing`, the rows just read, drawn without asking
   * the server again (the moment in which a click finds no command is as short as VS Code allows).
   */
  redraw(listing?: ConversationInfo[]): void {
    this.drawn = null;
    this.fresh = listing;
    this.changed.fire();
  }
  /** The listing a redraw just read, for the draw it asked for. */
  private fresh: ConversationInfo[] | undefined;
  /** This workspace's rows being read for a draw (settled either way). */
  private drawing: Promise<unknown> | undefined;
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
      if (!this.allWorkspaces && node === undefined) {
        const reading = this.fresh !== undefined ? Promise.resolve(this.fresh) : this.load();
        this.fresh = undefined;
        const drawing = reading.catch(() => undefined);
        this.drawing = drawing;
        try {
          const conversations = await reading;
          this.drawn = JSON.stringify(conversations);
          return conversations.map((c) => new ConversationItem(c));
        } finally {
          if (this.drawing === drawing) this.drawing = undefined;
        }
      }
      if (node !== undefined && node.current) return (await this.load()).map((c) => new ConversationItem(c));
      if (node === undefined) {
        const current = await this.currentWorkspace();
        return W.workspaceGroups(await this.workspaces(), current).map((w) => new WorkspaceItem(w, w.workspace === current));
      }
      const elsewhere = { workspace: node.info.workspace, name: W.workspaceName(node.info) };
      return (await W.conversationsOf(await this.client(), node.info.workspace)).map((c) => new ConversationItem(c, elsewhere));
    } catch (error) {
      this.drawn = null;
      this.quiet(error);
      return [];
    }
  }
}
