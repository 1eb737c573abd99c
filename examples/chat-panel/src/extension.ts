/**
 * The VS Code side of the sample chat panel: activation wires its parts together. The history
 * server starts through the shim (./launcher) on first use; ./list shows the conversations in an
 * activity-bar view, ./panel runs the chat webview (a turn: ./turn; message actions: ./actions),
 * ./commands registers the commands. Every rule about what the panel shows is pure (./state and
 * the modules beside it); these files only wire events to it.
 */

import * as vscode from "vscode";
import type { ChatHistoryClient } from "chat-history-client";
import type { ChatHistoryServer } from "chat-history-client/vscode";
import { State } from "vscode-languageclient/node";
import { registerMcpServer } from "./agents";
import { registerCommands } from "./commands";
import { ServerLauncher } from "./launcher";
import { ConversationsView, importedBadges } from "./list";
import { ChatPanel } from "./panel";

let server: ChatHistoryServer | undefined;
let starting: Promise<ChatHistoryServer> | undefined;
let launcher: ServerLauncher;
let chatPanel: ChatPanel | undefined;
/** The start failed and said so (one notification): the views stay quiet about it. */
let startFailure: unknown;
/** How many times the history server started (the language client starts a new one when it stops). */
let serverStarts = 0;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  launcher = new ServerLauncher(context);
  const client = async (): Promise<ChatHistoryClient> => {
    if (server) return server.client;
    starting ??= launcher.startSettled().then(
      async (s) => {
        await serverFailed(false);
        server = s;
        serverStarts++;
        s.languageClient.onDidChangeState((event) => {
          if (event.newState === State.Running) serverStarts++;
        });
        s.client.onTrimmed((event) => panel.onTrimmed(event));
        s.client.onChanged((event) => panel.onChanged(event));
        return s;
      },
      async (error) => {
        starting = undefined;
        startFailure = error;
        // Before the list gets its answer: it says the server could not start, never "No conversations".
        await serverFailed(true);
        void launcher.reportFailure(error);
        throw error;
      },
    );
    return (await starting).client;
  };
  /** The list's welcome when it is empty: the failed start with Retry, or this workspace's (no conversations yet). */
  const serverFailed = (failed: boolean) => vscode.commands.executeCommand("setContext", "chatPanel.serverFailed", failed);
  const protocolVersion = (): number => {
    const caps = server?.languageClient.initializeResult?.capabilities as
      | { experimental?: { chatHistory?: { protocolVersion?: number } } }
      | undefined;
    const advertised = caps?.experimental?.chatHistory?.protocolVersion ?? 1;
    // A server with the version-2 methods that still advertises 1 answers listConversations
    // with titles: that counts as version 2.
    return Math.max(advertised, list.v2 ? 2 : 1);
  };
  const quiet = (error: unknown) => {
    if (error !== startFailure) void vscode.window.showErrorMessage(`Chat history: ${(error as Error).message}`);
  };
  const list = new ConversationsView(client, quiet);
  registerMcpServer(context, launcher);
  const panel = new ChatPanel(context, client, protocolVersion, () => serverStarts, list);
  chatPanel = panel;
  const tree = vscode.window.createTreeView("chatPanel.conversations", { treeDataProvider: list });
  context.subscriptions.push(tree, vscode.window.registerFileDecorationProvider(importedBadges));
  const offerMoves = registerCommands({ context, client, protocolVersion, launcher, list, tree, panel, quiet });
  context.subscriptions.push(
    // Trust granted after a failed start: the interpreter setting counts now.
    vscode.workspace.onDidGrantWorkspaceTrust(() => !server && list.redraw()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      // A Python chosen after a failed start (Select Python…): try again at once.
      if (event.affectsConfiguration("chatPanel.pythonPath") && !server) list.redraw();
      if (event.affectsConfiguration("chatPanel.database")) {
        if (server) void launcher.offerReload();
        else list.redraw();
      }
    }),
  );
  // Start the server now, so that the list fills and the first prompt does not wait for it; then
  // offer to move the history of workspaces whose folder is gone.
  void client().then(
    () => {
      void list.refresh();
      void offerMoves().catch(quiet);
    },
    () => undefined,
  );
}

export async function deactivate(): Promise<void> {
  // A reload or a closed window: the reply in flight stores what the person saw before the
  // server stops (VS Code waits up to 5 s for deactivate).
  await chatPanel?.closing();
  chatPanel = undefined;
  await server?.dispose();
  server = undefined;
  starting = undefined;
}
