/**
 * chat-history-client: a typed client for chat-history-server.
 *
 * - {@link ChatHistoryClient} over any {@link RpcConnection} (no `vscode` import);
 * - {@link startStdioServer} to run the server as a child process from plain Node;
 * - `chat-history-client/vscode` for `startChatHistoryServer` inside a VS Code extension.
 */

export * from "./types";
export * from "./client";
export { GuardedConnection } from "./guard";
export { streamReply } from "./replies";
export type { ReplyDelta, ReplyEnding, StreamReplyOptions, StreamReplyResult } from "./replies";
export { checkPythonServer, installHint, ServerLaunchError, SERVER_MODULE, SERVER_DISTRIBUTION } from "./python";
export type { CheckServerOptions, ServerLaunchProblem } from "./python";
export { findServer, runCheck, pathPythons, frozenServerPath, bundledBoot, ServerNotFoundError, MINIMUM_PYTHON } from "./launch";
export type { FindServerOptions, LaunchCheck, LaunchProblem, ServerCommand, PythonCandidate, Attempt } from "./launch";
export { startStdioServer, spawnServer, answerConfiguration } from "./stdio";
export type {
  ConfigurationExchange,
  ExitStatus,
  InitializeResultLike,
  ServerProcess,
  ShowMessageParams,
  SpawnServerOptions,
  StdioServer,
  StdioServerOptions,
} from "./stdio";
