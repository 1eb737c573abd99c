/**
 * Test helpers: where the real Python server is, fresh storage folders, a started server that
 * is shut down after the test, and waiting for notifications.
 *
 * The interpreter is `$CHAT_HISTORY_PYTHON`, else `../.venv/bin/python` (relative to
 * client-shim) when it exists, else `python3`; it runs `-m chat_history`.
 */

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, sep } from "node:path";
import type { TestContext } from "node:test";
import { startStdioServer, type StdioServer, type StdioServerOptions } from "../src/stdio";
import type { Message, StoredMessage } from "../src/types";

/** client-shim/ (tests run from dist/test/). */
export const SHIM_ROOT = resolve(__dirname, "..", "..");
export const REPO_ROOT = resolve(SHIM_ROOT, "..");

function defaultPython(): string {
  const venv = resolve(REPO_ROOT, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

export const PYTHON = process.env.CHAT_HISTORY_PYTHON || defaultPython();
export const SERVER_ARGS = ["-m", "chat_history"];
const DEBUG = process.env.CHAT_HISTORY_SHIM_DEBUG === "1";

/** The folders `tempDir` made that still exist. */
const tempDirs = new Set<string>();

/** A fresh, empty folder removed after the test (again after a server on it has shut down:
 * hooks run in the order registered, so a server started on it after this call would otherwise
 * write its store back after the folder was removed and leave it behind in /tmp). */
export function tempDir(t: TestContext, prefix = "chat-history-shim-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// A server a test started some other way may also write after the folder's hook ran: what is
// still there goes when the test file's process exits.
process.on("exit", () => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

/** Removes again every `tempDir` folder that holds `path`. */
function removeTempDirsHolding(path: string): void {
  for (const dir of tempDirs) {
    if (path === dir || path.startsWith(dir + sep)) {
      rmSync(dir, { recursive: true, force: true });
      tempDirs.delete(dir);
    }
  }
}

/** Starts the real server on fresh storage; shut down (or killed) after the test. */
export async function startServer(t: TestContext, options: Partial<StdioServerOptions> = {}): Promise<StdioServer> {
  const storagePath = options.storagePath ?? join(tempDir(t), "store");
  const server = await startStdioServer({
    command: PYTHON,
    args: SERVER_ARGS,
    storagePath,
    onStderr: DEBUG ? (text) => process.stderr.write(text) : undefined,
    ...options,
  });
  t.after(async () => {
    await server.shutdown(3_000);
    removeTempDirsHolding(resolve(storagePath));
  });
  return server;
}

/** Rejects if `promise` does not settle within `ms` (so a hang fails the test instead of stalling it). */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
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

/** Resolves once `predicate()` holds (polling), or rejects after `ms`. */
export async function until(predicate: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** semantics.md: a row costs ceil(utf8 bytes / 4) + 4. */
export function rowTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, "utf8") / 4) + 4;
}

export function sumTokens(rows: readonly StoredMessage[]): number {
  return rows.reduce((sum, row) => sum + row.tokens, 0);
}

/** A plain question/answer turn. */
export function turn(i: number): Message[] {
  return [
    { role: "user", content: `question ${i}` },
    { role: "assistant", content: `answer ${i}` },
  ];
}

/** The text of an OpenAI/Anthropic-style content field (a string or a list of text parts). */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string" ? (part as { text: string }).text : ""))
      .join("");
  }
  return "";
}
