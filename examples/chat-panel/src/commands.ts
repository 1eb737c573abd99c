/**
 * The panel's commands (package.json `contributes.commands`), registered in one place: the
 * list's and the palette's (new chat, rename, export, delete, all workspaces, move history,
 * import history, the API key, the MCP configuration).
 */

import * as vscode from "vscode";
import type { ChatHistoryClient, WorkspaceInfo } from "chat-history-client";
import { copyMcpConfiguration } from "./agents";
import { apiKeyName, modelSettings } from "./host";
import * as I from "./imports";
import type { ServerLauncher } from "./launcher";
import { WorkspaceItem, type ConversationItem, type ConversationsView, type ListNode } from "./list";
import type { ChatPanel } from "./panel";
import * as S from "./state";
import * as V from "./view";
import * as W from "./workspaces";

/** What the commands act on, from the extension's activation. */
export interface CommandsContext {
  context: vscode.ExtensionContext;
  client: () => Promise<ChatHistoryClient>;
  protocolVersion: () => number;
  launcher: ServerLauncher;
  list: ConversationsView;
  tree: vscode.TreeView<ListNode>;
  panel: ChatPanel;
  /** Says what went wrong, unless it is the server's failed start (already said once). */
  quiet: (error: unknown) => void;
}

/**
 * Registers every command; returns the offer, once per window, to move the history of workspaces
 * whose folder no longer exists (a notification with Move Here).
 */
export function registerCommands({ context, client, protocolVersion, launcher, list, tree, panel, quiet }: CommandsContext): () => Promise<void> {
  /** "All workspaces" in the list, or this workspace's conversations only (kept per workspace). */
  const showAllWorkspaces = async (all: boolean): Promise<void> => {
    list.allWorkspaces = all;
    tree.description = all ? "All workspaces" : undefined;
    await vscode.commands.executeCommand("setContext", "chatPanel.allWorkspaces", all);
    await context.workspaceState.update("chatPanel.allWorkspaces", all);
    list.redraw();
  };
  void showAllWorkspaces(context.workspaceState.get<boolean>("chatPanel.allWorkspaces", false));

  /** Moves `info`'s history into this workspace (moveWorkspace) and says what happened. */
  const moveHere = async (info: WorkspaceInfo): Promise<void> => {
    const to = await list.currentWorkspace();
    const outcome = await W.moveHistory(await client(), info, to);
    await list.refresh();
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
    await list.refresh();
    void vscode.window.showInformationMessage(I.importedText(pick.found.source, done.conversations));
  };

  /**
   * The conversation a list or palette command acts on: the item's, else the panel's, unless the
   * panel shows another workspace's chat (read-only here: those commands act on this workspace's).
   */
  const ownConversation = (item: ConversationItem | undefined): string | undefined => {
    if (item !== undefined) return item.elsewhere === null ? item.info.conversationId : undefined;
    if (panel.elsewhere) {
      void vscode.window.showInformationMessage(`The chat shown belongs to the workspace "${panel.elsewhere.name}": continue it in this workspace first.`);
      return undefined;
    }
    return panel.conversationId;
  };

  /** Rename: the title goes to the server (updateConversation); empty goes back to the automatic one. */
  const rename = async (conversationId: string): Promise<void> => {
    const info = list.infos.get(conversationId);
    const title = await vscode.window.showInputBox({
      title: "Rename conversation",
      prompt: "Empty: back to the automatic title (the first prompt).",
      value: info?.titleSource === "user" ? (info.title ?? "") : "",
      placeHolder: S.titleOf(info),
    });
    if (title === undefined) return;
    await (await client()).updateConversation({ conversationId, title: title.trim() === "" ? null : title.trim() });
    await list.refresh();
    panel.retitled(conversationId);
  };

  /** Export: Markdown (every row, from `get`), or the CLI's JSONL (`python -m chat_history.cli export`). */
  const exportConversation = async (conversationId: string): Promise<void> => {
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
      const { messages } = await (await client()).get({ conversationId });
      content = V.toMarkdown(S.titleOf(list.infos.get(conversationId)), messages);
      language = "markdown";
    } else {
      content = await launcher.cli([...launcher.storageArgs(context.globalStorageUri.fsPath), "export", conversationId]);
      language = "jsonl";
    }
    const doc = await vscode.workspace.openTextDocument({ content, language });
    await vscode.window.showTextDocument(doc, { preview: false });
  };

  context.subscriptions.push(
    vscode.commands.registerCommand("chatPanel.importHistory", () => importHistory().catch(quiet)),
    vscode.commands.registerCommand("chatPanel.show", () => panel.reveal()),
    vscode.commands.registerCommand("chatPanel.newChat", () => panel.newChat()),
    vscode.commands.registerCommand("chatPanel.openConversation", (id: string, elsewhere?: S.Elsewhere | null, title?: string) =>
      panel.open(id, undefined, elsewhere ?? null, title),
    ),
    // Retry of a failed start (the empty list's button): the list asks for the server again.
    vscode.commands.registerCommand("chatPanel.startServer", () => list.redraw()),
    vscode.commands.registerCommand("chatPanel.refresh", () => {
      list.redraw();
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
      void list.refresh();
      await panel.deleted(id);
    }),
    vscode.commands.registerCommand("chatPanel.renameConversation", async (item?: ConversationItem) => {
      const id = ownConversation(item);
      if (id !== undefined) await rename(id);
    }),
    vscode.commands.registerCommand("chatPanel.exportConversation", async (item?: ConversationItem) => {
      const id = ownConversation(item);
      if (id !== undefined) await exportConversation(id);
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
  return offerMoves;
}
