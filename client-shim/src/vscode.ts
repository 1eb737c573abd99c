/**
 * Starting the chat history server from a VS Code extension with vscode-languageclient (node).
 *
 * Only this module imports `vscode` and `vscode-languageclient`; import it as
 * `chat-history-client/vscode`. The core client (`chat-history-client`) works without them.
 */

import type * as vscode from "vscode";
import {
  LanguageClient,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import { ChatHistoryClient, ConnectionClosedError, ErrorCodes, type Disposable } from "./client";
import { GuardedConnection } from "./guard";
import { checkPythonServer, SERVER_MODULE } from "./python";
import { CONFIGURATION_SECTION, type ChatHistoryInitializationOptions, type WorkspaceIdentity } from "./types";

export interface ChatHistoryServerOptions {
  /** Python interpreter that has the server installed; default `"python3"`. */
  pythonPath?: string;
  /**
   * Run this command instead of `<pythonPath> -m chat_history` (e.g. what `findServer` from
   * `chat-history-client/launch` found: a frozen server, or bundled libraries); no interpreter
   * check then (`findServer` already ran the launch check).
   */
  server?: { command: string; args: string[]; describe?: string };
  /** Extra arguments after `-m chat_history`. */
  args?: string[];
  /** Environment of the server process; default: the extension host's. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Folder for the database; default `context.globalStorageUri.fsPath`. */
  storagePath?: string;
  /** Explicit workspace identity (default: the server derives it from the workspace folders). */
  workspace?: string;
  /**
   * A PostgreSQL database instead of SQLite in `storagePath` (libpq connection string or
   * `postgresql://` URI, never a password); default: `CHAT_HISTORY_DATABASE_URL` in `env`.
   */
  database?: string;
  /** What names the workspace's history (overrides the `chatHistory.workspaceIdentity` setting). */
  workspaceIdentity?: WorkspaceIdentity;
  /** Language client id (default `"chatHistory"`) and display name (default `"Chat History"`). */
  id?: string;
  name?: string;
  /** Check `<python> -c "import chat_history"` before starting (default true). */
  checkInterpreter?: boolean;
  /**
   * More LanguageClientOptions (output channel, error handler, middleware, …).
   * `initializationOptions` and `synchronize` are set by this function.
   */
  clientOptions?: Omit<LanguageClientOptions, "initializationOptions" | "synchronize">;
}

export interface ChatHistoryServer {
  /** Typed methods and the `onTrimmed` event. */
  readonly client: ChatHistoryClient;
  /** The underlying client, e.g. for its output channel or state events. */
  readonly languageClient: LanguageClient;
  /** Stops the server (shutdown + exit) and releases everything. Also run on extension deactivation. */
  dispose(): Promise<void>;
}

/** The parts of `vscode.ExtensionContext` this function uses. */
export type ChatHistoryExtensionContext = Pick<vscode.ExtensionContext, "globalStorageUri" | "subscriptions">;

/**
 * Starts `<pythonPath> -m chat_history` over stdio and resolves once it is initialized.
 *
 * - `initializationOptions.storagePath` is the extension's global storage folder.
 * - Settings: `synchronize.configurationSection = "chatHistory"`, so the server gets the
 *   section in `workspace/didChangeConfiguration` on every change, and `workspace/configuration`
 *   requests are answered from the same section.
 * - Rejects with a {@link ServerLaunchError} naming the interpreter and the `pip install`
 *   command when the interpreter or the package is missing.
 * - When the server process dies, requests in flight reject with {@link ConnectionClosedError}
 *   (the language client's error handler decides about restarts, as usual).
 */
export async function startChatHistoryServer(
  context: ChatHistoryExtensionContext,
  options: ChatHistoryServerOptions = {},
): Promise<ChatHistoryServer> {
  const pythonPath = options.pythonPath ?? "python3";
  if (options.checkInterpreter !== false && options.server === undefined) {
    await checkPythonServer(pythonPath, { env: options.env, cwd: options.cwd });
  }

  const command = options.server?.command ?? pythonPath;
  const args = [...(options.server?.args ?? ["-m", SERVER_MODULE]), ...(options.args ?? [])];
  const serverOptions: ServerOptions = {
    command,
    args,
    // No `transport`: stdio without the `--stdio` argument that TransportKind.stdio would add.
    options: { env: options.env, cwd: options.cwd },
  };
  const initializationOptions: ChatHistoryInitializationOptions = {
    storagePath: options.storagePath ?? context.globalStorageUri.fsPath,
  };
  if (options.workspace !== undefined) initializationOptions.workspace = options.workspace;
  if (options.database !== undefined) initializationOptions.database = options.database;
  if (options.workspaceIdentity !== undefined) initializationOptions.workspaceIdentity = options.workspaceIdentity;
  const clientOptions: LanguageClientOptions = {
    documentSelector: [],
    ...options.clientOptions,
    initializationOptions,
    synchronize: { configurationSection: CONFIGURATION_SECTION },
  };

  const id = options.id ?? "chatHistory";
  const languageClient = new LanguageClient(id, options.name ?? "Chat History", serverOptions, clientOptions);
  const guarded = new GuardedConnection(languageClient);
  const describe = `chat history server (${options.server?.describe ?? [command, ...args].join(" ")})`;

  let watching: Disposable | undefined;
  const watchServerProcess = () => {
    watching?.dispose();
    watching = undefined;
    const serverProcess = languageClient.serverProcess;
    if (serverProcess === undefined) return;
    watching = guarded.watchProcess(serverProcess, { sticky: false, describe });
    if (serverProcess.exitCode !== null || serverProcess.signalCode !== null) {
      guarded.fail(new ConnectionClosedError(`${describe} is not running`, ErrorCodes.ConnectionInactive), false);
    }
  };
  const stateListener = languageClient.onDidChangeState((event) => {
    if (event.newState === State.Running) watchServerProcess();
    else if (event.newState === State.Stopped) {
      guarded.fail(new ConnectionClosedError(`${describe} stopped`, ErrorCodes.ConnectionInactive), false);
    }
  });

  try {
    await languageClient.start();
  } catch (error) {
    stateListener.dispose();
    await stopQuietly(languageClient);
    throw new Error(`${describe} failed to start: ${(error as Error)?.message ?? String(error)}`, { cause: error });
  }
  watchServerProcess();

  const client = new ChatHistoryClient(guarded);
  let disposing: Promise<void> | undefined;
  const dispose = () =>
    (disposing ??= (async () => {
      stateListener.dispose();
      client.dispose();
      await stopQuietly(languageClient);
      watching?.dispose();
    })());
  context.subscriptions.push({ dispose: () => void dispose() });
  return { client, languageClient, dispose };
}

async function stopQuietly(languageClient: LanguageClient): Promise<void> {
  try {
    await languageClient.dispose();
  } catch {
    // Not running (start failed or already stopped): nothing to stop.
  }
}
