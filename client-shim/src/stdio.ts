/**
 * Runs the chat history server as a child process and talks to it over stdio with vscode-jsonrpc:
 * for hosts other than VS Code (CLIs, other editors' Node hosts) and for tests.
 *
 * It plays the part vscode-languageclient plays inside VS Code: answers `workspace/configuration`
 * the way VS Code does, sends `initialize`/`initialized`, and `shutdown`/`exit` at the end. When
 * the process dies, pending requests reject (with {@link ConnectionClosedError}) instead of hanging.
 */

import { spawn, type ChildProcess } from "node:child_process";
import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  type MessageConnection,
} from "vscode-jsonrpc/node";
import { ChatHistoryClient, ConnectionClosedError, ErrorCodes, toChatHistoryError, type Disposable } from "./client";
import { GuardedConnection } from "./guard";
import {
  CONFIGURATION_SECTION,
  type ChatHistoryInitializationOptions,
  type ChatHistoryServerCapabilities,
  type ChatHistorySettings,
  type JsonValue,
} from "./types";

export { CONFIGURATION_SECTION };

export interface SpawnServerOptions {
  /** Executable, e.g. a Python interpreter. */
  command: string;
  /** Its arguments, e.g. `["-m", "chat_history"]`. */
  args: string[];
  /** Environment of the server process; default: this process's. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Receives the server's stderr (its log) as text; the last few KB are kept for error messages anyway. */
  onStderr?: (text: string) => void;
  /** Receives `window/showMessage` (e.g. the warning about an invalid settings value). */
  onShowMessage?: (params: ShowMessageParams) => void;
}

/** `window/showMessage` params; `type` 1 Error, 2 Warning, 3 Info, 4 Log. */
export interface ShowMessageParams {
  type: number;
  message: string;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A spawned server process with a listening connection, not yet initialized. */
export interface ServerProcess extends Disposable {
  readonly process: ChildProcess;
  /** The raw vscode-jsonrpc connection (already listening; more handlers may be added). */
  readonly connection: MessageConnection;
  /** A typed client over the connection; its requests reject when the process dies. */
  readonly client: ChatHistoryClient;
  /** Settles when the process has exited. */
  readonly exited: Promise<ExitStatus>;
  /** The last few KB the server wrote to stderr. */
  stderrTail(): string;
  /** Kills the process (if still running) and disposes the connection. */
  dispose(): void;
}

const STDERR_TAIL_CHARS = 8192;

/**
 * Spawns `command args` and connects to its stdio. Requests from the server that any LSP client
 * answers (`client/registerCapability`, `window/workDoneProgress/create`, …) get a null answer;
 * `workspace/configuration` is left to the caller (see {@link startStdioServer}).
 */
export function spawnServer(options: SpawnServerOptions): ServerProcess {
  const describe = describeCommand(options);
  const child = spawn(options.command, options.args, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    stdio: ["pipe", "pipe", "pipe"],
    windowsHide: true,
  });
  let tail = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (text: string) => {
    tail = (tail + text).slice(-STDERR_TAIL_CHARS);
    options.onStderr?.(text);
  });
  // Writes to a dead process fail with EPIPE; the connection reports those itself.
  child.stdin?.on("error", () => undefined);

  const exited = new Promise<ExitStatus>((resolve) => {
    let settled = false;
    child.once("exit", (code, signal) => {
      settled = true;
      resolve({ code, signal });
    });
    child.once("error", () => {
      // A spawn failure: there will be no "exit".
      if (child.pid === undefined && !settled) resolve({ code: null, signal: null });
    });
  });

  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout!),
    new StreamMessageWriter(child.stdin!),
  );
  for (const method of ["client/registerCapability", "client/unregisterCapability", "window/workDoneProgress/create"]) {
    connection.onRequest(method, () => null);
  }
  connection.onRequest("window/showMessageRequest", () => null);
  // Logs and progress are not this host's business; without handlers vscode-jsonrpc would log them.
  connection.onNotification("window/logMessage", () => undefined);
  connection.onNotification("$/progress", () => undefined);
  connection.onNotification("$/logTrace", () => undefined);

  connection.onNotification("window/showMessage", (params: ShowMessageParams) => options.onShowMessage?.(params));
  connection.listen();

  const guarded = new GuardedConnection(connection);
  guarded.watchProcess(child, { sticky: true, describe });
  // Dispose the connection once the process is gone, so nothing waits on it (vscode-jsonrpc then
  // rejects whatever is still pending with "Pending response rejected since connection got disposed").
  let disposed = false;
  const disposeConnection = () => {
    if (disposed) return;
    disposed = true;
    connection.dispose();
  };
  void exited.then(() => setTimeout(disposeConnection, 300).unref());
  child.once("error", disposeConnection);

  const client = new ChatHistoryClient(guarded);
  return {
    process: child,
    connection,
    client,
    exited,
    stderrTail: () => tail,
    dispose: () => {
      client.dispose();
      if (child.exitCode === null && child.signalCode === null) child.kill();
      disposeConnection();
    },
  };
}

export interface StdioServerOptions extends SpawnServerOptions {
  /** `initializationOptions.storagePath`: folder that holds the database file. */
  storagePath?: string;
  /** `initializationOptions.settings`: the initial `chatHistory` section, nested. */
  settings?: ChatHistorySettings;
  /**
   * The current `chatHistory` section, nested, used to answer `workspace/configuration`
   * (called on every request of the server; null answers null; a promise is awaited, as an
   * editor that reads its settings asynchronously answers). Default: `settings`.
   */
  configuration?: () => any;
  /** `initializationOptions.workspace`: explicit workspace identity. */
  workspace?: string;
  /** Sent as `workspaceFolders` in `initialize`. */
  workspaceFolders?: { uri: string; name: string }[];
  /** Milliseconds to wait for the initialize answer (default 30 s). */
  initializeTimeoutMs?: number;
}

/** What the server answered to `initialize` (the parts this package reads). */
export interface InitializeResultLike {
  capabilities: { experimental?: { chatHistory?: ChatHistoryServerCapabilities; [key: string]: unknown }; [key: string]: unknown };
  serverInfo?: { name: string; version?: string };
  [key: string]: unknown;
}

/** One `workspace/configuration` request as the server sent it, with the answer given. */
export interface ConfigurationExchange {
  items: { section?: string; scopeUri?: string }[];
  answer: unknown[];
}

export interface StdioServer extends ServerProcess {
  readonly initializeResult: InitializeResultLike;
  /** `capabilities.experimental.chatHistory` of the initialize result. */
  readonly capabilities: ChatHistoryServerCapabilities | undefined;
  /** Every `workspace/configuration` request answered so far, oldest first. */
  readonly configurationRequests: readonly ConfigurationExchange[];
  /** Called after each `workspace/configuration` request has been answered. */
  onConfigurationRequest(listener: (exchange: ConfigurationExchange) => void): Disposable;
  /**
   * Sends `workspace/didChangeConfiguration`: with `settings`, as `{chatHistory: settings}`
   * (what vscode-languageclient sends with `synchronize.configurationSection`); without, as
   * `{settings: null}`, which makes the server ask `workspace/configuration` again.
   */
  didChangeConfiguration(settings?: ChatHistorySettings | null): Promise<void>;
  /** `shutdown`, then `exit`; resolves with the process's exit status (killing it after `timeoutMs`). */
  shutdown(timeoutMs?: number): Promise<ExitStatus>;
}

/**
 * Spawns the server, answers `workspace/configuration` like VS Code, and completes the LSP
 * handshake: `initialize` (declaring `workspace.configuration`, with `initializationOptions`
 * `{storagePath, settings, workspace}`), then `initialized`.
 */
export async function startStdioServer(options: StdioServerOptions): Promise<StdioServer> {
  const server = spawnServer(options);
  const { connection } = server;
  // With `configuration`, its value is the answer as is (null: "keep the current settings").
  const currentSection = (): unknown => (options.configuration ? options.configuration() : (options.settings ?? {}));
  const listeners = new Set<(exchange: ConfigurationExchange) => void>();
  const configurationRequests: ConfigurationExchange[] = [];

  connection.onRequest("workspace/configuration", async (params: { items?: ConfigurationExchange["items"] }) => {
    const items = params?.items ?? [];
    const answer = answerConfiguration(items, await currentSection());
    const exchange = { items, answer };
    configurationRequests.push(exchange);
    // Listeners run after the answer has been written.
    setImmediate(() => {
      for (const listener of [...listeners]) listener(exchange);
    });
    return answer;
  });
  connection.onRequest("workspace/workspaceFolders", () => options.workspaceFolders ?? null);

  const initializationOptions: ChatHistoryInitializationOptions = {};
  if (options.storagePath !== undefined) initializationOptions.storagePath = options.storagePath;
  const initialSettings = options.settings ?? (options.configuration ? options.configuration() : undefined);
  // A configuration read asynchronously is not known yet: the server waits for its answer.
  if (initialSettings !== undefined && initialSettings !== null && !isPromise(initialSettings)) {
    initializationOptions.settings = initialSettings;
  }
  if (options.workspace !== undefined) initializationOptions.workspace = options.workspace;

  const initializeParams = {
    processId: process.pid,
    clientInfo: { name: "chat-history-client" },
    rootUri: null,
    workspaceFolders: options.workspaceFolders ?? null,
    capabilities: {
      workspace: {
        configuration: true,
        didChangeConfiguration: { dynamicRegistration: false },
        workspaceFolders: options.workspaceFolders !== undefined,
      },
      window: { showMessage: {}, workDoneProgress: false },
    },
    initializationOptions,
  };

  let initializeResult: InitializeResultLike;
  try {
    initializeResult = await withTimeout(
      server.client.connection.sendRequest<InitializeResultLike>("initialize", initializeParams),
      options.initializeTimeoutMs ?? 30_000,
      () => `${describeCommand(options)} did not answer initialize`,
    );
  } catch (error) {
    server.dispose();
    throw startupError(error, options, server);
  }
  await connection.sendNotification("initialized", {});

  return {
    ...server,
    initializeResult,
    capabilities: initializeResult?.capabilities?.experimental?.chatHistory,
    configurationRequests,
    onConfigurationRequest: (listener) => {
      listeners.add(listener);
      return { dispose: () => listeners.delete(listener) };
    },
    didChangeConfiguration: async (settings) => {
      await connection.sendNotification("workspace/didChangeConfiguration", {
        settings: settings === undefined || settings === null ? null : { [CONFIGURATION_SECTION]: settings },
      });
    },
    shutdown: async (timeoutMs = 5_000) => {
      if (server.process.exitCode === null && server.process.signalCode === null) {
        try {
          await withTimeout(server.client.connection.sendRequest("shutdown"), timeoutMs, () => "shutdown timed out");
          await connection.sendNotification("exit");
        } catch {
          // Dead or stuck: killed below.
        }
      }
      const timer = setTimeout(() => server.process.kill("SIGKILL"), timeoutMs);
      const status = await server.exited;
      clearTimeout(timer);
      server.dispose();
      return status;
    },
  };
}

/**
 * Answers `workspace/configuration` items the way VS Code does: one value per item, looked up by
 * dotted section in `{chatHistory: section}` (no section: the whole tree; unknown: null).
 */
export function answerConfiguration(items: { section?: string | null }[], section: unknown): JsonValue[] {
  const root: Record<string, unknown> = { [CONFIGURATION_SECTION]: section };
  return items.map((item) => {
    let value: unknown = root;
    if (item.section) {
      for (const key of item.section.split(".")) {
        value = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
      }
    }
    return value === undefined ? null : (JSON.parse(JSON.stringify(value)) as JsonValue);
  });
}

function isPromise(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

function describeCommand(options: SpawnServerOptions): string {
  return `chat history server (${[options.command, ...options.args].join(" ")})`;
}

function startupError(error: unknown, options: SpawnServerOptions, server: ServerProcess): unknown {
  const mapped = toChatHistoryError(error, "initialize");
  const stderr = server.stderrTail().trim();
  const spawnFailed = server.process.pid === undefined;
  if (spawnFailed) {
    return new ConnectionClosedError(
      `${describeCommand(options)} could not be started: ${(error as Error)?.message ?? error}. ` +
        `Check that "${options.command}" exists and is executable.`,
      ErrorCodes.ConnectionInactive,
      {},
      { method: "initialize", cause: error },
    );
  }
  if (mapped instanceof ConnectionClosedError && stderr !== "") {
    return new ConnectionClosedError(
      `${mapped.message}\n--- server stderr (tail) ---\n${stderr}`,
      mapped.code,
      { exitCode: mapped.exitCode, signal: mapped.signal },
      { method: "initialize", cause: error },
    );
  }
  return mapped;
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: () => string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(message())), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
