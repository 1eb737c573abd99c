/**
 * A stand-in for the `vscode` module, just enough for vscode-languageclient's LanguageClient to
 * start a server, answer `workspace/configuration` and send `didChangeConfiguration` outside VS
 * Code. Importing this file installs it: later `require("vscode")` calls get it. Anything not
 * modelled here is a permissive stub (callable, constructible, every property another stub).
 */

import Module = require("node:module");

type Listener<T> = (event: T) => void;

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  readonly event = (listener: Listener<T>) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };
  fire(event: T): void {
    for (const listener of [...this.listeners]) listener(event);
  }
  dispose(): void {
    this.listeners.clear();
  }
}

class Disposable {
  constructor(private readonly callOnDispose: () => void = () => undefined) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((item) => item.dispose()));
  }
  dispose(): void {
    this.callOnDispose();
  }
}

export class Uri {
  private constructor(readonly scheme: string, readonly fsPath: string) {}
  get path(): string {
    return this.fsPath;
  }
  static file(path: string): Uri {
    return new Uri("file", path);
  }
  static parse(value: string): Uri {
    const match = /^([a-z][\w+.-]*):(?:\/\/)?(.*)$/i.exec(value);
    return match ? new Uri(match[1]!, match[1] === "file" ? match[2]! : value) : new Uri("file", value);
  }
  toString(): string {
    return this.scheme === "file" ? `file://${this.fsPath}` : this.fsPath;
  }
  toJSON(): string {
    return this.toString();
  }
}

class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  readonly token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel(): void {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {
    this.emitter.dispose();
  }
}

/** A callable, constructible object whose every property is another stub. */
function stub(name: string): any {
  const target = function () {} as any;
  return new Proxy(target, {
    get(_target, prop) {
      if (prop === "then") return undefined; // not a thenable
      if (prop === Symbol.toPrimitive) return () => name;
      if (prop === "toString") return () => name;
      if (prop === "prototype") return target.prototype;
      return stub(`${name}.${String(prop)}`);
    },
    apply: () => stub(`${name}()`),
    construct: () => stub(`new ${name}`),
  });
}

function withFallback<T extends object>(name: string, known: T): T {
  return new Proxy(known, {
    get(target, prop, receiver) {
      if (prop in target) return Reflect.get(target, prop, receiver);
      if (prop === "then" || typeof prop === "symbol") return undefined;
      return stub(`${name}.${String(prop)}`);
    },
  });
}

/** The settings tree `workspace.getConfiguration` reads (e.g. `{chatHistory: {maxMessages: 2}}`). */
export const settings: { [section: string]: any } = {};
const configurationChanged = new EventEmitter<{ affectsConfiguration(section: string): boolean }>();

function lookup(path: string[]): unknown {
  let value: any = settings;
  for (const key of path) value = value !== null && typeof value === "object" ? value[key] : undefined;
  return value;
}

/** Replaces the `chatHistory` section and fires `workspace.onDidChangeConfiguration` like VS Code. */
export function changeSettings(section: string, value: unknown): void {
  settings[section] = value;
  configurationChanged.fire({ affectsConfiguration: (s) => s === section || s.startsWith(`${section}.`) || section.startsWith(`${s}.`) });
}

export const outputLines: string[] = [];

function outputChannel(name: string) {
  const log = (...parts: unknown[]) => outputLines.push(parts.map(String).join(" "));
  return withFallback(`OutputChannel(${name})`, {
    name,
    logLevel: 2,
    onDidChangeLogLevel: new EventEmitter<number>().event,
    append: log,
    appendLine: log,
    replace: log,
    clear: () => undefined,
    show: () => undefined,
    hide: () => undefined,
    dispose: () => undefined,
    trace: log,
    debug: log,
    info: log,
    warn: log,
    error: log,
  });
}

const never = <T>() => new EventEmitter<T>().event;

export const fakeVscode = withFallback("vscode", {
  version: "1.91.0",
  EventEmitter,
  Disposable,
  Uri,
  CancellationTokenSource,
  CancellationError: class CancellationError extends Error {},
  LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
  ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
  env: withFallback("env", { language: "en", appName: "fake-vscode", openExternal: async () => false }),
  workspace: withFallback("workspace", {
    workspaceFolders: undefined,
    textDocuments: [],
    notebookDocuments: [],
    getConfiguration(section?: string) {
      const base = section ? section.split(".") : [];
      const get = (key: string, fallback?: unknown) => {
        const value = lookup([...base, ...key.split(".")]);
        return value === undefined ? fallback : structuredClone(value);
      };
      const scope = (lookup(base) ?? {}) as object;
      return withFallback("WorkspaceConfiguration", {
        ...scope,
        get,
        has: (key: string) => get(key) !== undefined,
        inspect: () => undefined,
        update: async () => undefined,
      });
    },
    onDidChangeConfiguration: configurationChanged.event,
    onDidChangeWorkspaceFolders: never(),
    onDidOpenTextDocument: never(),
    onDidCloseTextDocument: never(),
    onDidChangeTextDocument: never(),
    onDidSaveTextDocument: never(),
    onWillSaveTextDocument: never(),
  }),
  window: withFallback("window", {
    createOutputChannel: (name: string) => outputChannel(name),
    showErrorMessage: async (message: string) => {
      outputLines.push(`[showErrorMessage] ${message}`);
      return undefined;
    },
    showWarningMessage: async () => undefined,
    showInformationMessage: async () => undefined,
    activeTextEditor: undefined,
    visibleTextEditors: [],
    onDidChangeActiveTextEditor: never(),
    onDidChangeVisibleTextEditors: never(),
    tabGroups: withFallback("tabGroups", { all: [], onDidChangeTabs: never(), onDidChangeTabGroups: never() }),
  }),
  languages: withFallback("languages", { match: () => 0 }),
  commands: withFallback("commands", { registerCommand: () => new Disposable() }),
});

// Install: `require("vscode")` resolves to this stand-in from now on.
const FAKE_PATH = "/__fake_vscode__/vscode.js";
const moduleInternals = Module as unknown as {
  _resolveFilename: (request: string, ...rest: unknown[]) => string;
};
const originalResolve = moduleInternals._resolveFilename;
moduleInternals._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]) {
  return request === "vscode" ? FAKE_PATH : originalResolve.call(this, request, ...rest);
};
const fakeModule = new Module(FAKE_PATH);
fakeModule.filename = FAKE_PATH;
fakeModule.loaded = true;
fakeModule.exports = fakeVscode;
require.cache[FAKE_PATH] = fakeModule;
