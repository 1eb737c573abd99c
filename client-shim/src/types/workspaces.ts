/** The workspaces family (version 3): `chatHistory/moveWorkspace` and `listWorkspaces`. */

/** `chatHistory/moveWorkspace`: re-keys every conversation of `from` to `to` (one transaction). */
export interface MoveWorkspaceParams {
  from: string;
  to: string;
}
export interface MoveWorkspaceResult {
  /** How many conversations moved. */
  conversations: number;
}

/** `chatHistory/listWorkspaces` takes no params. */
export type ListWorkspacesParams = Record<string, never>;
export interface WorkspaceInfo {
  workspace: string;
  conversations: number;
  lastActivity: number | null;
  /** The folder recorded for it (null: none). */
  folder: string | null;
  /** null when the folder was recorded on another machine. */
  folderExists: boolean | null;
  /** The normalized remote URL of its git repository (null: none known). */
  repository: string | null;
  /**
   * Extension (issue 35 item 5): its conversations that re-keying renamed because their id was
   * taken here, newest first; empty when none. Absent from servers before it.
   */
  renamed?: RenamedConversation[];
}
/** A conversation that re-keying (an old spelling, a moved folder, a link) moved under a new id. */
export interface RenamedConversation {
  /** Its id in this workspace now. */
  conversationId: string;
  /** Its id before. */
  was: string;
  /** The workspace spelling it came from. */
  from: string;
  /** When, in epoch milliseconds. */
  at: number;
}
export interface ListWorkspacesResult {
  workspaces: WorkspaceInfo[];
}
