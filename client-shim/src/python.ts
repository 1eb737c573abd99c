/**
 * Checks that a Python interpreter exists and can import the server package before a client
 * tries to start it, so that a missing interpreter or package is a clear message rather than a
 * server that dies on start. No `vscode` import.
 */

import { spawn } from "node:child_process";

/** The server's Python package (`python -m chat_history` runs it). */
export const SERVER_MODULE = "chat_history";
/** The distribution that provides it. */
export const SERVER_DISTRIBUTION = "chat-history-server";

export type ServerLaunchProblem = "interpreterNotFound" | "packageMissing" | "timeout";

/** The interpreter cannot run the server: `problem` says why, the message says what to do. */
export class ServerLaunchError extends Error {
  constructor(
    message: string,
    readonly problem: ServerLaunchProblem,
    readonly pythonPath: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "ServerLaunchError";
  }
}

export interface CheckServerOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Module to import (default `chat_history`). */
  module?: string;
  /** Default 20 s (a cold interpreter on a busy machine can be slow). */
  timeoutMs?: number;
}

/** The `pip install` line that fixes a missing package for `pythonPath`. */
export function installHint(pythonPath: string): string {
  return `${quoteArg(pythonPath)} -m pip install ${SERVER_DISTRIBUTION}`;
}

/**
 * Runs `<pythonPath> -c "import chat_history"`. Resolves when it succeeds; rejects with a
 * {@link ServerLaunchError} naming the interpreter and the `pip install` command otherwise.
 */
export function checkPythonServer(pythonPath: string, options: CheckServerOptions = {}): Promise<void> {
  const module = options.module ?? SERVER_MODULE;
  const timeoutMs = options.timeoutMs ?? 20_000;
  return new Promise<void>((resolve, reject) => {
    let stderr = "";
    let settled = false;
    const settle = (error?: ServerLaunchError) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) reject(error);
      else resolve();
    };
    const child = spawn(pythonPath, ["-c", `import ${module}`], {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ["ignore", "ignore", "pipe"],
      windowsHide: true,
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      settle(
        new ServerLaunchError(
          `Python interpreter "${pythonPath}" did not finish "import ${module}" within ${timeoutMs} ms.`,
          "timeout",
          pythonPath,
        ),
      );
    }, timeoutMs);
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (text: string) => {
      stderr = (stderr + text).slice(-4000);
    });
    child.once("error", (error: NodeJS.ErrnoException) => {
      settle(
        new ServerLaunchError(
          `Python interpreter "${pythonPath}" was not found or cannot be run (${error.code ?? error.message}). ` +
            `Set the Python interpreter option to a Python 3.11+ with the chat history server installed ` +
            `(${installHint(pythonPath === "" ? "python3" : pythonPath)}).`,
          "interpreterNotFound",
          pythonPath,
          { cause: error },
        ),
      );
    });
    child.once("close", (code, signal) => {
      if (code === 0) {
        settle();
        return;
      }
      const lastLine = stderr.trim().split(/\r?\n/).pop() ?? "";
      const detail = lastLine !== "" ? lastLine : signal !== null ? `killed by ${signal}` : `exit code ${code}`;
      settle(
        new ServerLaunchError(
          `Python interpreter "${pythonPath}" cannot import the chat history server package "${module}" (${detail}). ` +
            `Install it into that interpreter: ${installHint(pythonPath)}`,
          "packageMissing",
          pythonPath,
        ),
      );
    });
  });
}

function quoteArg(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `"${value.replace(/(["\\$`])/g, "\\$1")}"`;
}
