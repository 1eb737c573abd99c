/**
 * `GuardedConnection`: wraps an {@link RpcConnection} so that the requests in flight reject as
 * soon as the server process dies, instead of waiting for an answer that will never come.
 */

import type { ChildProcess } from "node:child_process";
import { ConnectionClosedError, ErrorCodes, type Disposable, type RpcConnection } from "./client";

/** How long a request whose pipe broke waits for the process's exit to be reported. */
const CONNECTION_FAILURE_GRACE_MS = 1_000;
const CONNECTION_FAILURE_CODES: ReadonlySet<number> = new Set([
  ErrorCodes.MessageWriteError,
  ErrorCodes.MessageReadError,
  ErrorCodes.PendingResponseRejected,
  ErrorCodes.ConnectionInactive,
]);

function isConnectionFailure(error: unknown): boolean {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === "number" && CONNECTION_FAILURE_CODES.has(code);
}

export class GuardedConnection implements RpcConnection {
  private readonly pending = new Set<(error: Error) => void>();
  private failure: Error | undefined;
  private watched = 0;

  constructor(private readonly inner: RpcConnection) {}

  /** Number of requests sent and not yet answered. */
  get pendingCount(): number {
    return this.pending.size;
  }

  sendRequest<R>(method: string, param?: any): Promise<R> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return new Promise<R>((resolve, reject) => {
      let grace: NodeJS.Timeout | undefined;
      const fail = (error: Error) => {
        clearTimeout(grace);
        reject(error);
      };
      this.pending.add(fail);
      let sent: Promise<R>;
      try {
        sent = param === undefined ? this.inner.sendRequest<R>(method) : this.inner.sendRequest<R>(method, param);
      } catch (error) {
        this.pending.delete(fail);
        reject(error);
        return;
      }
      sent.then(
        (result) => {
          this.pending.delete(fail);
          resolve(result);
        },
        (error: unknown) => {
          if (this.watched > 0 && isConnectionFailure(error)) {
            // The pipe broke: the process is most likely going. Give its exit a moment to be seen,
            // so the caller learns the exit code or signal rather than "write after destroyed".
            grace = setTimeout(() => {
              if (this.pending.delete(fail)) reject(error);
            }, CONNECTION_FAILURE_GRACE_MS);
            return;
          }
          this.pending.delete(fail);
          reject(error);
        },
      );
    });
  }

  onNotification(method: string, handler: (params: any) => void): Disposable {
    return this.inner.onNotification(method, handler);
  }

  /**
   * Rejects every pending request with `error`. With `sticky`, later requests reject with it too
   * (the server will not come back); otherwise they go through (e.g. a client that restarts it).
   */
  fail(error: Error, sticky: boolean): void {
    if (sticky) this.failure = error;
    const pending = [...this.pending];
    this.pending.clear();
    for (const fail of pending) fail(error);
  }

  /**
   * Fails pending requests when `process` exits or cannot be spawned. Returns a Disposable that
   * stops watching.
   */
  watchProcess(process: ChildProcess, options: { sticky: boolean; describe: string }): Disposable {
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
      this.fail(
        new ConnectionClosedError(`${options.describe} ${how}; the request got no answer`, ErrorCodes.PendingResponseRejected, {
          exitCode: code,
          signal,
        }),
        options.sticky,
      );
    };
    const onError = (error: Error) => {
      this.fail(
        new ConnectionClosedError(`${options.describe} failed: ${error.message}`, ErrorCodes.ConnectionInactive, {}, { cause: error }),
        options.sticky,
      );
    };
    // An answer the server wrote just before it exited may still sit unread in its stdout pipe:
    // let the reader drain it (stdout closes) before failing what is left, within a bound.
    const onExitDrained = (code: number | null, signal: NodeJS.Signals | null) => {
      afterStdoutDrained(process, () => onExit(code, signal));
    };
    process.on("exit", onExitDrained);
    process.on("error", onError);
    this.watched++;
    let disposed = false;
    return {
      dispose: () => {
        if (disposed) return;
        disposed = true;
        this.watched--;
        process.off("exit", onExitDrained);
        process.off("error", onError);
      },
    };
  }
}

function afterStdoutDrained(process: ChildProcess, then: () => void, boundMs = 250): void {
  const stdout = process.stdout;
  if (stdout === null || stdout.destroyed || stdout.readableEnded) {
    setImmediate(then);
    return;
  }
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    stdout.off("close", finish);
    setImmediate(then);
  };
  const timer = setTimeout(finish, boundMs);
  stdout.once("close", finish);
}
