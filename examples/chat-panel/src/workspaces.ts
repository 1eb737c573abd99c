/**
 * History of other workspaces (protocol version 3, "Workspace identity"): how the panel names a
 * workspace, which ones it offers to move into this one, and the three requests it makes about
 * them (the session's own identity, moving a workspace's history, continuing another workspace's
 * conversation here). No `vscode` here: the extension shows what these return.
 */

import { InvalidParamsError } from "chat-history-client";
import type { ChatHistoryClient, ConversationInfo, WorkspaceInfo } from "chat-history-client";
import { plural } from "./state";

/** A conversation id no client uses: `updateConversation` without a title or metadata stores nothing. */
export const PROBE_ID = "chat-panel:workspace-probe";

/**
 * The session's workspace identity as the server keys it (normalized, or `repo:…` with the
 * "repository" identity): the workspace an empty `updateConversation` answer names. It stores
 * nothing (protocol.md: "otherwise nothing is stored and the answer describes the empty
 * conversation").
 */
export async function sessionWorkspace(client: ChatHistoryClient): Promise<string> {
  return (await client.updateConversation({ conversationId: PROBE_ID })).workspace;
}

function lastSegment(path: string): string {
  const parts = path.split(/[\\/]/).filter((p) => p !== "");
  return parts.at(-1) ?? path;
}

/** A workspace as a person knows it: its folder's name, else the repository's, else the identity's last segment. */
export function workspaceName(info: Pick<WorkspaceInfo, "workspace" | "folder" | "repository">): string {
  if (info.folder) return lastSegment(info.folder);
  const id = info.workspace;
  if (id.startsWith("repo:")) {
    const rest = id.slice("repo:".length);
    if (info.repository && rest.startsWith(info.repository)) {
      const inner = rest.slice(info.repository.length).replace(/^\/+|\/+$/g, "");
      return lastSegment(info.repository) + (inner ? `/${inner}` : "");
    }
    return lastSegment(rest);
  }
  if (id.startsWith("file:")) {
    try {
      return lastSegment(decodeURIComponent(new URL(id).pathname));
    } catch {
      return lastSegment(id);
    }
  }
  return id;
}

/** Where its folder is, in words ("" when nothing is worth saying). */
export function folderState(info: Pick<WorkspaceInfo, "folder" | "folderExists">): string {
  if (info.folderExists === false) return "folder no longer exists";
  if (info.folderExists === null && info.folder !== null) return "on another machine";
  return "";
}

/** The list's line beside a workspace's name: "this workspace · 2 conversations", "1 conversation · folder no longer exists". */
export function workspaceDescription(info: WorkspaceInfo, current: boolean): string {
  const parts = [plural(info.conversations, "conversation")];
  if (current) parts.unshift("this workspace");
  else if (folderState(info) !== "") parts.push(folderState(info));
  return parts.join(" · ");
}

export function workspaceTooltip(info: WorkspaceInfo): string {
  const lines = [info.workspace];
  if (info.folder !== null) lines.push(`Folder: ${info.folder}${folderState(info) ? ` (${folderState(info)})` : ""}`);
  if (info.repository !== null) lines.push(`Repository: ${info.repository}`);
  if (info.lastActivity !== null) lines.push(`Last activity: ${new Date(info.lastActivity).toLocaleString()}`);
  return lines.join("\n");
}

/** This workspace as listWorkspaces would show it (listed there only once it has a conversation). */
export function emptyWorkspace(workspace: string): WorkspaceInfo {
  return { workspace, conversations: 0, lastActivity: null, folder: null, folderExists: null, repository: null };
}

/** The "all workspaces" list: this workspace first (even without conversations), then the others, newest activity first. */
export function workspaceGroups(workspaces: WorkspaceInfo[], current: string): WorkspaceInfo[] {
  const own = workspaces.find((w) => w.workspace === current) ?? emptyWorkspace(current);
  return [own, ...workspaces.filter((w) => w.workspace !== current)];
}

/**
 * Workspaces whose history the panel offers to move here unasked: their folder was recorded on
 * this machine and no longer exists (a moved or deleted folder), and they still hold
 * conversations. Each is offered once (`asked`); a folder that exists never is.
 */
export function moveOffers(workspaces: WorkspaceInfo[], current: string, asked: ReadonlySet<string>): WorkspaceInfo[] {
  return workspaces.filter((w) => w.workspace !== current && w.folderExists === false && w.conversations > 0 && !asked.has(w.workspace));
}

/** The unasked offer's words. */
export function offerText(info: WorkspaceInfo): string {
  const its = info.conversations === 1 ? "its conversation" : `its ${plural(info.conversations, "conversation")}`;
  return `The folder of "${workspaceName(info)}" (${info.folder}) no longer exists. Move ${its} into this workspace?`;
}

/** The confirmation before a move: the question and its detail. */
export function confirmText(info: WorkspaceInfo): { message: string; detail: string } {
  return {
    message: `Move ${plural(info.conversations, "conversation")} from "${workspaceName(info)}" into this workspace?`,
    detail:
      `They will be listed under this workspace and no longer under "${workspaceName(info)}" (${info.folder ?? info.workspace}). ` +
      "Nothing is deleted; a conversation id present in both stops the move before anything changes.",
  };
}

/** What a move did, in words: `text` the outcome, `detail` (a refusal) why and what to do. */
export type MoveOutcome = { ok: true; moved: number; text: string } | { ok: false; text: string; detail: string };

/**
 * `moveWorkspace` from `from` into `to`, with its outcome in words. A conversation id present in
 * both (-32602 `to`) moves nothing; the words say so. Other errors are thrown.
 */
export async function moveHistory(client: ChatHistoryClient, from: WorkspaceInfo, to: string): Promise<MoveOutcome> {
  const name = workspaceName(from);
  try {
    const { conversations } = await client.moveWorkspace({ from: from.workspace, to });
    return { ok: true, moved: conversations, text: `Moved ${plural(conversations, "conversation")} here from "${name}".` };
  } catch (error) {
    if (error instanceof InvalidParamsError && error.field === "to") {
      return {
        ok: false,
        text: `Nothing was moved from "${name}".`,
        detail:
          `${sentence(error.message.replace(/^to: /, ""))}. Both workspaces keep all their conversations. ` +
          "Delete one of the two, or continue it here under a new id (All Workspaces → open it → Continue in this workspace), then move again.",
      };
    }
    throw error;
  }
}

function sentence(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * Continuing another workspace's conversation: a copy in this workspace (`fork` with
 * `newWorkspace`), which then runs with this workspace's files. The original stays where it was.
 */
export function continueHere(
  client: ChatHistoryClient,
  source: { conversationId: string; workspace: string },
  to: string,
  newConversationId: string,
): Promise<ConversationInfo> {
  return client.fork({ conversationId: source.conversationId, workspace: source.workspace, newConversationId, newWorkspace: to });
}

/** Every conversation of `workspace` (up to `max`), newest activity first. */
export async function conversationsOf(client: ChatHistoryClient, workspace: string | undefined, max = 2000): Promise<ConversationInfo[]> {
  const conversations: ConversationInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listConversations({ limit: 200, ...(workspace === undefined ? {} : { workspace }), ...(cursor ? { cursor } : {}) });
    conversations.push(...page.conversations);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined && conversations.length < max);
  return conversations;
}
