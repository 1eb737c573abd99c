/**
 * Finding and starting the history server for the panel (issue 26): the interpreter setting
 * `chatPanel.pythonPath` — read from user/machine settings only and only in a trusted
 * workspace, so a cloned repository's .vscode/settings.json never picks what runs — then the
 * frozen server inside this extension (server/), then its bundled libraries (bundled/) run by a
 * Python >= 3.11 found on the machine (the Python extension's environments when it is installed,
 * `py -3.x` on Windows, python3.x on PATH). A failure is one notification with buttons.
 *
 * The history lives in SQLite in the extension's storage, or in the PostgreSQL database that
 * `chatPanel.database` names (machine-scoped, read from user/machine settings only, so a
 * workspace cannot redirect it), else `CHAT_HISTORY_DATABASE_URL` from the environment.
 */

import { execFile } from "node:child_process";
import * as vscode from "vscode";
import { findServer, ServerNotFoundError, type ServerCommand } from "chat-history-client/launch";
import { startChatHistoryServer, type ChatHistoryServer } from "chat-history-client/vscode";
import { CloseAction, ErrorAction, type ErrorHandler } from "vscode-languageclient/node";

const SELECT = "Select Python…";
const SETTINGS = "Open Settings";
const LOG = "Show Log";

export class ServerLauncher {
  readonly output: vscode.LogOutputChannel;
  private found: ServerCommand | undefined;
  /** The window's first start has run (its settings and trust were known by its end). */
  private settled = false;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel("Chat History Server", { log: true });
    context.subscriptions.push(this.output);
  }

  /** The explicit interpreter: user or machine settings only (never a workspace's), trusted workspaces only. */
  pythonSetting(): string | undefined {
    if (!vscode.workspace.isTrusted) return undefined;
    const inspected = vscode.workspace.getConfiguration("chatPanel").inspect<string>("pythonPath");
    const value = inspected?.globalValue?.trim();
    return value ? value : undefined;
  }

  /** What {@link pythonSetting} read, for the log: the user's value and the workspace's trust. */
  private pythonSettingRead(): string {
    const value = vscode.workspace.getConfiguration("chatPanel").inspect<string>("pythonPath")?.globalValue?.trim();
    return `chatPanel.pythonPath ${value ? `is ${JSON.stringify(value)}` : "is not set"} in the user's settings, the workspace is ${vscode.workspace.isTrusted ? "" : "not "}trusted`;
  }

  /** The database setting: user or machine settings only (never a workspace's); undefined: none. */
  databaseSetting(): string | undefined {
    const inspected = vscode.workspace.getConfiguration("chatPanel").inspect<string>("database");
    const value = inspected?.globalValue?.trim();
    return value ? value : undefined;
  }

  /** The CLI's arguments naming the history the server uses: the database, else the SQLite store. */
  storageArgs(storagePath: string): string[] {
    const database = this.databaseSetting();
    if (database !== undefined) return ["--database", database];
    if (process.env.CHAT_HISTORY_DATABASE_URL?.trim()) return []; // the CLI reads it as the server does
    return ["--db", storagePath];
  }

  /** The database setting changed while a server runs on the old one. */
  async offerReload(): Promise<void> {
    const choice = await vscode.window.showInformationMessage(
      "The chat history database setting changed: reload the window to use it.",
      "Reload Window",
    );
    if (choice === "Reload Window") await vscode.commands.executeCommand("workbench.action.reloadWindow");
  }

  async find(): Promise<ServerCommand> {
    const started = Date.now();
    const found = await findServer({
      pythonPath: this.pythonSetting(),
      extensionPath: this.context.extensionPath,
      extraPythons: await pythonExtensionEnvironments(),
      log: (line) => this.output.info(line),
    });
    this.output.info(`server: ${found.describe} (found in ${Date.now() - started} ms)`);
    this.found = found;
    return found;
  }

  /**
   * {@link start}, and at the window's first start a server not found is looked for once more,
   * when a `chatPanel` setting changes or the workspace is trusted, or after `settleMs`: in the
   * first moments of a window (a reload) VS Code may not have the user's settings or the
   * workspace's trust yet, and `chatPanel.pythonPath` reads as unset although it is set.
   */
  async startSettled(settleMs = 3_000): Promise<ChatHistoryServer> {
    try {
      return await this.start();
    } catch (error) {
      if (this.settled || !(error instanceof ServerNotFoundError)) throw error;
      this.output.info(`no server found yet (${error.message}; ${this.pythonSettingRead()}); looking again once the settings and the workspace's trust are known`);
      await settingsKnown(settleMs);
      this.output.info(`looking again: ${this.pythonSettingRead()}`);
      return await this.start();
    } finally {
      this.settled = true;
    }
  }

  async start(): Promise<ChatHistoryServer> {
    const found = await this.find();
    // Until the server has started, a closed connection is the failed start itself (reported
    // once by reportFailure), not a crash to restart from; afterwards the client's usual policy.
    let usual: ErrorHandler | undefined;
    const errorHandler: ErrorHandler = {
      error: (error, message, count) => usual?.error(error, message, count) ?? { action: ErrorAction.Shutdown, handled: true },
      closed: () => usual?.closed() ?? { action: CloseAction.DoNotRestart, handled: true },
    };
    // The server is stopped by the extension's deactivate, once the reply in flight has sent what
    // it showed, not by VS Code's disposal of the extension's subscriptions (which it runs right
    // after calling deactivate, without waiting): its stop is not one of them.
    const server = await startChatHistoryServer({ globalStorageUri: this.context.globalStorageUri, subscriptions: [] }, {
      server: found,
      database: this.databaseSetting(),
      clientOptions: {
        outputChannel: this.output,
        errorHandler,
        // A refused initialize (a database this server cannot use) is reported once, by
        // reportFailure with its buttons, not a second time by the language client.
        initializationFailedHandler: (error) => {
          this.output.error(`initialize refused: ${error instanceof Error ? error.message : String(error)}`);
          return false;
        },
      },
    });
    usual = server.languageClient.createDefaultErrorHandler();
    return server;
  }

  /** Runs the `chat-history` CLI the same way the server runs; its stdout. */
  async cli(args: string[]): Promise<string> {
    const found = this.found ?? (await this.find());
    return new Promise<string>((resolve, reject) =>
      execFile(found.command, [...found.cliArgs, ...args], { maxBuffer: 256 * 1024 * 1024 }, (error, stdout, stderr) =>
        error ? reject(new Error(stderr.trim() || error.message)) : resolve(stdout),
      ),
    );
  }

  /** The one notification of a failed start, with what a person can do about it. */
  async reportFailure(error: unknown): Promise<void> {
    const message = error instanceof Error ? error.message : String(error);
    this.output.error(`cannot start the chat history server: ${message}`);
    if (error instanceof ServerNotFoundError) {
      for (const attempt of error.attempts) this.output.info(`  tried ${attempt.describe}: ${attempt.problem}: ${attempt.detail}`);
    }
    // A refused database (-32602 naming it: a password in it, no driver on this platform) is
    // mended in chatPanel.database, everything else in chatPanel.pythonPath.
    const setting = refusedField(error) === "database" ? "chatPanel.database" : "chatPanel.pythonPath";
    const choice = await vscode.window.showErrorMessage(`Chat history server: ${message}`, SELECT, SETTINGS, LOG);
    if (choice === SELECT) await this.selectPython();
    else if (choice === SETTINGS) await vscode.commands.executeCommand("workbench.action.openSettings", setting);
    else if (choice === LOG) this.output.show();
  }

  /** Picks an interpreter file and stores it in the user's settings. */
  private async selectPython(): Promise<void> {
    const picked = await vscode.window.showOpenDialog({
      title: "Select a Python 3.11 or newer",
      canSelectFiles: true,
      canSelectFolders: false,
      canSelectMany: false,
      openLabel: "Use this Python",
    });
    if (!picked?.[0]) return;
    await vscode.workspace.getConfiguration("chatPanel").update("pythonPath", picked[0].fsPath, vscode.ConfigurationTarget.Global);
  }
}

/** Resolves when a `chatPanel` setting changes or the workspace is trusted, or after `ms`. */
function settingsKnown(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      changed.dispose();
      trusted.dispose();
      resolve();
    };
    const timer = setTimeout(done, ms);
    const changed = vscode.workspace.onDidChangeConfiguration((event) => event.affectsConfiguration("chatPanel") && done());
    const trusted = vscode.workspace.onDidGrantWorkspaceTrust(done);
  });
}

/** The `data.field` of a -32602 the server answered (found along the error's causes). */
function refusedField(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const data = (e as { data?: { field?: unknown } }).data;
    if (typeof data?.field === "string") return data.field;
  }
  return undefined;
}

/** The Python extension's known environments when it is installed (optional, never required). */
async function pythonExtensionEnvironments(): Promise<string[]> {
  const extension = vscode.extensions.getExtension<{
    environments?: { known?: readonly { path: string }[] };
  }>("ms-python.python");
  if (extension === undefined) return [];
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    const paths = (api?.environments?.known ?? []).map((e) => e.path).filter((p) => typeof p === "string" && p !== "");
    return paths.slice(0, 8); // each is asked the launch check: a long list would delay the start
  } catch {
    return [];
  }
}
