/**
 * What the chat panel's parts share: the panel's settings, new conversation ids, and
 * {@link PanelHost}, what ./turn and ./actions see of the panel (./panel) they work for.
 */

import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import type { ChatHistoryClient } from "chat-history-client";
import type { ConversationsView } from "./list";
import { MODEL_KINDS, type ModelKind, type ModelSettings } from "./providers";
import type * as S from "./state";

const SECTION = "chatPanel";

export function config() {
  return vscode.workspace.getConfiguration(SECTION);
}

export function apiKeyName(kind: ModelKind): string {
  return `chatPanel.apiKey.${kind}`;
}

export async function modelSettings(context: vscode.ExtensionContext): Promise<ModelSettings> {
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

export function newConversationId(): string {
  return `chat-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
}

/**
 * The panel as its parts see it: the conversation shown (`state`, changed only through `update`,
 * which posts it), the server, the list, and the panel's own moves that the parts call.
 */
export interface PanelHost {
  readonly state: S.PanelState;
  readonly context: vscode.ExtensionContext;
  readonly list: ConversationsView;
  readonly client: () => Promise<ChatHistoryClient>;
  readonly protocolVersion: () => number;
  /**
   * How many times this window's history server has started (the language client starts a new
   * one when it stops): a change during a turn means the server it began with is gone.
   */
  readonly serverStarts: () => number;
  /** The state becomes `next` and is posted to the webview (at most every 30 ms). */
  update(next: S.PanelState): void;
  /**
   * The open conversation as stored now (only its rows with `rowsOnly`); `whole`: its newest rows
   * replace the ones shown (another branch may be the active path now), else they are merged.
   */
  reload(rowsOnly?: boolean, whole?: boolean): Promise<void>;
  /** The title after a change, from the server: the panel's tab and the list follow. */
  refreshTitle(): Promise<void>;
  /** Opens a conversation (a new one without an id). */
  open(conversationId?: string): Promise<void>;
  /** A turn ended: what changed while it ran is read again, and the title. */
  afterTurn(): Promise<void>;
}
