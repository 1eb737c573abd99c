/**
 * Finding the chat history server the way ruff-vscode finds ruff: an explicit interpreter, a
 * frozen server inside the extension, the extension's bundled libraries run by a Python >= 3.11
 * found on the machine. Every candidate is asked the server's launch check (`--check`, one
 * line of JSON; protocol.md "Launch check") before it is used, and a failure says in a person's
 * words what is wrong. No `vscode` import.
 *
 * Extension layout (what `make vsix` packs):
 *   server/chat-history-server[.exe]   a frozen server (PyInstaller onedir), needs no Python
 *   bundled/boot.py, bundled/libs/     the server and its dependencies, run as
 *                                      `python -I -S bundled/boot.py`
 */

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

/** The oldest Python the server runs on. */
export const MINIMUM_PYTHON: readonly [number, number] = [3, 11];
/** Newest first: the Pythons looked for on PATH (`python3.14` …) and through `py -3.x`. */
export const PYTHON_MINORS = [14, 13, 12, 11] as const;

/** What the server's `--check` prints (protocol.md "Launch check"). */
export interface LaunchCheck {
  ok: boolean;
  version?: string;
  python?: string;
  sqlite?: string | null;
  problem?: string | null;
  /** `pythonTooOld`, `nativeModuleMissing`, `sqliteTooOld`, `dependencyMissing`. */
  reason?: string | null;
}

/** How to run the server, and its CLI, once found. */
export interface ServerCommand {
  /** `setting`: the explicit interpreter with the server installed; `frozen`; `bundled`. */
  kind: "setting" | "frozen" | "bundled";
  command: string;
  /** Arguments that start the server on stdio. */
  args: string[];
  /** Arguments before the CLI's own (`chat-history export …`). */
  cliArgs: string[];
  /** The passing launch check. */
  check: LaunchCheck;
  /** e.g. `frozen server /ext/server/chat-history-server` or `python3.12 -I -S …/boot.py`. */
  describe: string;
}

export type LaunchProblem =
  | "noPython"
  | "pythonTooOld"
  | "nativeModuleMissing"
  | "dependencyMissing"
  | "packageMissing"
  | "externallyManaged"
  | "storeStub"
  | "interpreterNotFound"
  | "checkFailed";

/** One candidate that was tried and why it was not used. */
export interface Attempt {
  describe: string;
  problem: LaunchProblem;
  detail: string;
}

/** No way to run the server was found: `problem` is the most telling one, the message says what to do. */
export class ServerNotFoundError extends Error {
  constructor(
    message: string,
    readonly problem: LaunchProblem,
    readonly attempts: Attempt[],
  ) {
    super(message);
    this.name = "ServerNotFoundError";
  }
}

export interface FindServerOptions {
  /** The explicit interpreter setting (read by the caller from user/machine scope only, in a trusted workspace). */
  pythonPath?: string;
  /** The extension's folder: `server/` and `bundled/` are looked for there. */
  extensionPath?: string;
  /** More interpreters to try for the bundled libraries, before the PATH search (e.g. the Python extension's environments). */
  extraPythons?: string[];
  /** Replaces the PATH search (tests). */
  pathPythons?: PythonCandidate[];
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  /** Per check; default 20 s. */
  timeoutMs?: number;
  /** Receives one line per candidate tried. */
  log?: (line: string) => void;
}

/** An interpreter to try: `command` and the arguments that select it (`py -3.12`). */
export interface PythonCandidate {
  command: string;
  args: string[];
}

/** The Pythons looked for on this platform, newest first. */
export function pathPythons(platform: NodeJS.Platform = process.platform): PythonCandidate[] {
  const found: PythonCandidate[] = [];
  if (platform === "win32") {
    for (const minor of PYTHON_MINORS) found.push({ command: "py", args: [`-3.${minor}`] });
  }
  for (const minor of PYTHON_MINORS) found.push({ command: `python3.${minor}`, args: [] });
  found.push({ command: "python3", args: [] }, { command: "python", args: [] });
  return found;
}

export function frozenServerPath(extensionPath: string, platform: NodeJS.Platform = process.platform): string {
  return join(extensionPath, "server", platform === "win32" ? "chat-history-server.exe" : "chat-history-server");
}

export function bundledBoot(extensionPath: string): string {
  return join(extensionPath, "bundled", "boot.py");
}

/**
 * Resolves how to run the server: the explicit `pythonPath` (with the server installed, or
 * else running the bundled libraries); the frozen server; the bundled libraries with the first
 * Python >= 3.11 that passes the check. Rejects with {@link ServerNotFoundError}.
 */
export async function findServer(options: FindServerOptions = {}): Promise<ServerCommand> {
  const platform = options.platform ?? process.platform;
  const attempts: Attempt[] = [];
  const log = options.log ?? (() => undefined);
  const boot = options.extensionPath !== undefined ? bundledBoot(options.extensionPath) : undefined;
  const hasBundle = boot !== undefined && existsSync(boot);
  const run = (candidate: PythonCandidate, args: string[]) =>
    runCheck(candidate.command, [...candidate.args, ...args], options);
  const bundled = async (candidate: PythonCandidate): Promise<ServerCommand | undefined> => {
    const args = [...candidate.args, "-I", "-S", boot!];
    const describe = `${[candidate.command, ...args].join(" ")}`;
    const outcome = await run(candidate, ["-I", "-S", boot!, "--check"]);
    log(`${describe} --check: ${outcome.summary}`);
    if (outcome.check?.ok) {
      return { kind: "bundled", command: candidate.command, args, cliArgs: [...args, "cli"], check: outcome.check, describe };
    }
    attempts.push({ describe: candidate.command + (candidate.args.length ? ` ${candidate.args.join(" ")}` : ""), ...classify(outcome, platform) });
    return undefined;
  };

  const explicit = options.pythonPath?.trim();
  if (explicit) {
    const candidate = { command: explicit, args: [] };
    const outcome = await run(candidate, ["-m", "chat_history", "--check"]);
    log(`${explicit} -m chat_history --check: ${outcome.summary}`);
    if (outcome.check?.ok) {
      return {
        kind: "setting",
        command: explicit,
        args: ["-m", "chat_history"],
        cliArgs: ["-m", "chat_history.cli"],
        check: outcome.check,
        describe: `${explicit} -m chat_history`,
      };
    }
    const failed = classify(outcome, platform);
    if (failed.problem === "packageMissing" && hasBundle) {
      const found = await bundled(candidate);
      if (found) return found;
    } else {
      attempts.push({ describe: explicit, ...failed });
    }
    if (failed.problem === "packageMissing" && !hasBundle) {
      const managed = await externallyManaged(explicit, options);
      if (managed) attempts[attempts.length - 1] = { describe: explicit, problem: "externallyManaged", detail: failed.detail };
    }
    throw notFound(attempts, { explicit, platform, bundle: hasBundle });
  }

  if (options.extensionPath !== undefined) {
    const frozen = frozenServerPath(options.extensionPath, platform);
    if (existsSync(frozen)) {
      const outcome = await runCheck(frozen, ["--check"], options);
      log(`${frozen} --check: ${outcome.summary}`);
      if (outcome.check?.ok) {
        return { kind: "frozen", command: frozen, args: [], cliArgs: ["cli"], check: outcome.check, describe: `frozen server ${frozen}` };
      }
      attempts.push({ describe: frozen, ...classify(outcome, platform) });
    }
  }

  if (hasBundle) {
    const candidates = [
      ...(options.extraPythons ?? []).map((command) => ({ command, args: [] })),
      ...(options.pathPythons ?? pathPythons(platform)),
    ];
    for (const candidate of candidates) {
      const found = await bundled(candidate);
      if (found) return found;
    }
  }
  throw notFound(attempts, { platform, bundle: hasBundle });
}

interface CheckOutcome {
  check?: LaunchCheck;
  /** spawn error code (ENOENT, EACCES, …) */
  spawnError?: string;
  code: number | null;
  stderr: string;
  timedOut: boolean;
  summary: string;
}

/** Runs one launch check; never rejects. */
export function runCheck(command: string, args: string[], options: FindServerOptions = {}): Promise<CheckOutcome> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let done = false;
    const finish = (outcome: Omit<CheckOutcome, "summary" | "stderr" | "check">) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const line = stdout.trim().split(/\r?\n/).pop() ?? "";
      let check: LaunchCheck | undefined;
      try {
        const parsed = JSON.parse(line) as LaunchCheck;
        if (typeof parsed === "object" && parsed !== null && typeof parsed.ok === "boolean") check = parsed;
      } catch {
        // not the check's line: the module is missing, or this is not a Python at all
      }
      const summary = check
        ? check.ok
          ? `ok (Python ${check.python ?? "?"}, SQLite ${check.sqlite ?? "?"})`
          : `${check.reason ?? "problem"}: ${check.problem ?? ""}`
        : outcome.spawnError
          ? `cannot run (${outcome.spawnError})`
          : outcome.timedOut
            ? `no answer within ${timeoutMs} ms`
            : `exit ${outcome.code}: ${lastLine(stderr) || lastLine(stdout)}`;
      resolve({ ...outcome, stderr, check, summary });
    };
    const child = spawn(command, args, {
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish({ code: null, timedOut: true });
    }, timeoutMs);
    child.stdout?.setEncoding("utf8");
    child.stderr?.setEncoding("utf8");
    child.stdout?.on("data", (text: string) => (stdout = (stdout + text).slice(-8000)));
    child.stderr?.on("data", (text: string) => (stderr = (stderr + text).slice(-8000)));
    child.once("error", (error: NodeJS.ErrnoException) => finish({ code: null, timedOut: false, spawnError: error.code ?? error.message }));
    child.once("close", (code) => finish({ code, timedOut: false }));
  });
}

function lastLine(text: string): string {
  return text.trim().split(/\r?\n/).pop() ?? "";
}

function classify(outcome: CheckOutcome, platform: NodeJS.Platform): { problem: LaunchProblem; detail: string } {
  if (outcome.check && !outcome.check.ok) {
    const reason = outcome.check.reason;
    const problem: LaunchProblem =
      reason === "pythonTooOld" || reason === "nativeModuleMissing" || reason === "dependencyMissing" ? reason : "checkFailed";
    return { problem, detail: outcome.check.problem ?? "the launch check failed" };
  }
  // The Windows Store's python.exe/python3.exe stub: "Python was not found; run without
  // arguments to install from the Microsoft Store" with exit code 9009.
  if (platform === "win32" && (outcome.code === 9009 || /Microsoft Store/i.test(outcome.stderr))) {
    return { problem: "storeStub", detail: lastLine(outcome.stderr) || "exit code 9009" };
  }
  if (outcome.spawnError !== undefined) return { problem: "interpreterNotFound", detail: outcome.spawnError };
  const stderr = outcome.stderr;
  if (/No module named '?chat_history/.test(stderr)) {
    return { problem: "packageMissing", detail: lastLine(stderr) };
  }
  // Older than the launch check itself can run on (3.8): it cannot even parse the server.
  if (/SyntaxError|future feature annotations/.test(stderr)) {
    return { problem: "pythonTooOld", detail: `this Python is too old to read the server (${lastLine(stderr)})` };
  }
  if (outcome.timedOut) return { problem: "checkFailed", detail: "the launch check did not answer" };
  return { problem: "checkFailed", detail: lastLine(stderr) || lastLine(outcome.summary) || `exit code ${outcome.code}` };
}

/** Whether `python` is a system Python that refuses `pip install` (PEP 668). */
async function externallyManaged(python: string, options: FindServerOptions): Promise<boolean> {
  const probe =
    "import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')) and __import__('sys').prefix == __import__('sys').base_prefix)";
  const outcome = await runCheck(python, ["-I", "-c", probe], options);
  return outcome.code === 0 && outcome.summary.includes("True");
}

const PRIORITY: LaunchProblem[] = [
  "pythonTooOld",
  "nativeModuleMissing",
  "dependencyMissing",
  "externallyManaged",
  "packageMissing",
  "storeStub",
  "checkFailed",
  "interpreterNotFound",
];

function notFound(
  attempts: Attempt[],
  context: { explicit?: string; platform: NodeJS.Platform; bundle: boolean },
): ServerNotFoundError {
  const minimum = `${MINIMUM_PYTHON[0]}.${MINIMUM_PYTHON[1]}`;
  const real = attempts.filter((a) => a.problem !== "interpreterNotFound" || context.explicit !== undefined);
  const worst = PRIORITY.find((p) => real.some((a) => a.problem === p));
  const attempt = real.find((a) => a.problem === worst);
  const install =
    context.platform === "win32"
      ? `Install Python ${minimum} or newer from python.org (or \`winget install Python.Python.3.13\`)`
      : context.platform === "darwin"
        ? `Install Python ${minimum} or newer from python.org or Homebrew (\`brew install python@3.13\`)`
        : `Install Python ${minimum} or newer with your package manager (e.g. \`sudo apt install python3.11\`) or from python.org`;
  const select = "then select it with \"Select Python…\" (the chatPanel.pythonPath setting)";
  if (attempt === undefined) {
    const message = context.bundle
      ? `No Python ${minimum} or newer was found (looked for ${context.platform === "win32" ? "py -3.14 … py -3.11, " : ""}python3.14 … python3.11, python3 and python on PATH). ${install}, ${select}.`
      : "This build of the extension carries no server for this platform, and no interpreter is set. " +
        `Install the extension's package for your platform, or install the chat history server into a Python ${minimum}+ and select that Python.`;
    return new ServerNotFoundError(message, "noPython", attempts);
  }
  const who =
    context.explicit !== undefined
      ? `The Python set in chatPanel.pythonPath ("${context.explicit}")`
      : /chat-history-server(\.exe)?$/.test(attempt.describe)
        ? `The server inside the extension (${attempt.describe})`
        : `Python "${attempt.describe}"`;
  let message: string;
  switch (attempt.problem) {
    case "pythonTooOld":
      message = `${attempt.detail.replace(/^chat-history-server: /, "")}. ${install}, ${select}.`;
      if (!/too old/.test(message)) message = `${who} is too old: the chat history server needs Python ${minimum} or newer. ${install}, ${select}.`;
      break;
    case "nativeModuleMissing":
      message = `${who} cannot load the server's compiled SQLite module: this extension package carries it for Python 3.11 to 3.14 on its own platform only (${attempt.detail}). Select a Python 3.11–3.14, or install the extension's package for this platform.`;
      break;
    case "dependencyMissing":
      message = `${who} cannot load the chat history server: ${attempt.detail}.`;
      break;
    case "externallyManaged":
      message =
        `${who} does not have the chat history server installed, and it is a system Python that refuses \`pip install\` (externally managed). ` +
        `Create a virtual environment (\`python3 -m venv ~/.venvs/chat-history\`), install the server there (\`~/.venvs/chat-history/bin/pip install <the server's wheel>\`), and select its python; or clear the setting to use the server inside the extension.`;
      break;
    case "packageMissing":
      message = `${who} does not have the chat history server installed (${attempt.detail}). Install it into that Python (\`${quote(context.explicit ?? attempt.describe)} -m pip install <the server's wheel>\`), or clear the setting to use the server inside the extension.`;
      break;
    case "storeStub":
      message = `"${attempt.describe}" is the Microsoft Store's placeholder, not a Python (${attempt.detail}). ${install}, ${select}.`;
      break;
    case "interpreterNotFound":
      message = `${who} cannot be run (${attempt.detail}): check the path, or clear the setting to use the server inside the extension.`;
      break;
    default:
      message = `${who} failed the chat history server's launch check: ${attempt.detail}`;
  }
  return new ServerNotFoundError(message, attempt.problem, attempts);
}

function quote(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `"${value.replace(/(["\\$`])/g, "\\$1")}"`;
}
