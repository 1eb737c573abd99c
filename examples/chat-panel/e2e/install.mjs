/**
 * The panel installed from its linux-x64 .vsix and nothing else (issue 26 item 5): no pip
 * install of the server, no chatPanel.pythonPath, code-server and its extension host started
 * with a PATH that holds no Python at all (`--python none`) or only a Python 3.10
 * (`--python /path/to/python3.10`, linked as python3.10, python3 and python).
 *
 *   node e2e/install.mjs --code-server-root DIR --vsix FILE --python none|PATH --expect works|too-old
 *                        [--postgres REPO_PYTHON]
 *
 * works:   the frozen server starts; a chat turn is answered; after a restart of code-server the
 *          conversation is still listed and opens with its messages; Export (JSONL) runs the CLI
 *          through the same frozen server.
 * too-old: (a .vsix with bundled libraries only) one notification says the Python found is too
 *          old, with the Select Python…, Open Settings and Show Log buttons.
 *
 * --postgres: the history in a PostgreSQL database instead (issue 24): a throwaway cluster
 *          (tests/pgcluster.py, started with the repo's Python, which the extension host never
 *          sees) named in the user's chatPanel.database; the server inside the .vsix must carry
 *          psycopg and libpq itself. The turn is read back from the database with psql (and is
 *          nowhere in the extension's SQLite storage), survives the restart once, and the
 *          export reads it from the database too.
 * no-driver: (--postgres, a .vsix built --without-postgres, as for win32-arm64, whose psycopg has
 *          no wheel) the panel's notification says the server inside has no PostgreSQL driver
 *          here and what to do; its Open Settings shows chatPanel.database; no server restarts.
 */

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startFakeModelServer } from "./fake-model-server.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);
const ENTRY = join(resolve(args["code-server-root"]), "bin", "entry.js");
const VSIX = resolve(args.vsix);
const PYTHON = args.python === "none" ? null : resolve(args.python);
const EXPECT = args.expect;
const POSTGRES = args.postgres ? resolve(args.postgres) : null;
const CHROMIUM = args.chromium ?? "/usr/bin/chromium";
const ARTIFACTS = resolve(args.artifacts ?? join(here, "artifacts", `install-${PYTHON ? "py310" : "nopython"}-${EXPECT}${POSTGRES ? "-postgres" : ""}`));
const STEP_TIMEOUT = 90_000;
assert.ok(["works", "too-old", "no-driver"].includes(EXPECT), "--expect works|too-old|no-driver");
assert.ok(EXPECT !== "no-driver" || args.postgres, "--expect no-driver needs --postgres");

rmSync(ARTIFACTS, { recursive: true, force: true });
mkdirSync(ARTIFACTS, { recursive: true });
const root = mkdtempSync(join(tmpdir(), "chat-panel-install-"));
const dirs = {
  home: join(root, "home"),
  userData: join(root, "user-data"),
  extensions: join(root, "extensions"),
  workspace: join(root, "workspace"),
  bin: join(root, "bin"),
  config: join(root, "config.yaml"),
};
for (const d of Object.values(dirs)) if (!d.endsWith(".yaml")) mkdirSync(d, { recursive: true });
if (PYTHON) for (const name of ["python3.10", "python3", "python"]) symlinkSync(PYTHON, join(dirs.bin, name));
// The only folder on PATH: no Python in it, or only the 3.10. code-server runs on this Node
// (process.execPath), so it needs nothing from PATH.
const env = {
  PATH: dirs.bin,
  HOME: dirs.home,
  XDG_CONFIG_HOME: join(dirs.home, ".config"),
  XDG_DATA_HOME: join(dirs.home, ".local", "share"),
  XDG_CACHE_HOME: join(dirs.home, ".cache"),
  LANG: "C.UTF-8",
  // The extension host would otherwise take PATH from the user's login shell (VS Code's
  // shell-environment resolution, skipped when launched from its CLI), putting /usr/bin back.
  VSCODE_CLI: "1",
};
const settingsFile = join(dirs.userData, "User", "settings.json");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log("#", ...a);
const started = Date.now();
const since = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
let passed = 0;
let failed = 0;
async function step(name, body) {
  try {
    await body();
    passed++;
    console.log(`ok ${passed + failed} - ${name} (${since()})`);
  } catch (error) {
    failed++;
    console.log(`not ok ${passed + failed} - ${name}\n${String(error?.stack ?? error).replace(/^/gm, "  ")}`);
    await page?.screenshot({ path: join(ARTIFACTS, `failed-${passed + failed}.png`) }).catch(() => undefined);
    throw error;
  }
}

async function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on("error", rej);
  });
}

let codeServer = null;
let browser = null;
let page = null;
let port = 0;
let serverLog = "";

async function startCodeServer() {
  port ||= await freePort();
  const child = spawn(
    process.execPath,
    [
      ENTRY,
      "--config", dirs.config,
      "--user-data-dir", dirs.userData,
      "--extensions-dir", dirs.extensions,
      "--bind-addr", `127.0.0.1:${port}`,
      "--auth", "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      dirs.workspace,
    ],
    { env, detached: true, stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stdout.on("data", (d) => (serverLog += d));
  child.stderr.on("data", (d) => (serverLog += d));
  codeServer = child;
  for (let i = 0; i < 240; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) return;
    } catch {
      // not yet
    }
    if (child.exitCode !== null) throw new Error(`code-server exited ${child.exitCode}:\n${serverLog}`);
    await sleep(250);
  }
  throw new Error(`code-server did not answer /healthz:\n${serverLog}`);
}

async function stopCodeServer() {
  if (!codeServer) return;
  const child = codeServer;
  codeServer = null;
  const exited = new Promise((r) => child.once("exit", r));
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    return;
  }
  await Promise.race([exited, sleep(10_000)]);
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // gone
  }
}

async function openWorkbench() {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT);
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`);
  await page.waitForSelector(".monaco-workbench", { timeout: STEP_TIMEOUT });
  await page.waitForSelector(".activitybar", { timeout: STEP_TIMEOUT });
}

async function closeBrowser() {
  await browser?.close().catch(() => undefined);
  browser = null;
  page = null;
}

/**
 * Runs a palette command; `opensQuickInput`: it shows its own QuickPick, so the widget stays
 * open (waiting for it to close would only end at the step's timeout).
 */
async function runCommand(title, { opensQuickInput = false } = {}) {
  const deadline = Date.now() + STEP_TIMEOUT;
  for (;;) {
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(">");
    await page.keyboard.type(title.replace(/^[^:]*: /, ""), { delay: 5 });
    const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
    try {
      await row.waitFor({ state: "visible", timeout: 3000 });
    } catch (error) {
      await page.keyboard.press("Escape");
      if (Date.now() > deadline) throw error;
      await sleep(1000);
      continue;
    }
    await row.click();
    if (!opensQuickInput) await page.locator(".quick-input-widget").waitFor({ state: "hidden" }).catch(() => undefined);
    return;
  }
}

async function chatFrame() {
  const deadline = Date.now() + STEP_TIMEOUT;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      try {
        if ((await frame.$("#composer")) && (await frame.evaluate(() => document.getElementById("messages").childElementCount > 0))) return frame;
      } catch {
        // detached while looking
      }
    }
    await sleep(200);
  }
  throw new Error("the chat webview did not appear");
}

async function send(frame, prompt) {
  await frame.fill("#prompt", prompt);
  await frame.press("#prompt", "Enter");
  await frame.waitForFunction(
    (text) => {
      if (document.body.classList.contains("busy")) return false;
      const rows = [...document.querySelectorAll("article.msg")];
      const lastUser = rows.findLastIndex((r) => r.classList.contains("role-user"));
      if (lastUser < 0 || rows[lastUser].querySelector(".plain")?.textContent !== text) return false;
      const after = rows.slice(lastUser + 1);
      return after.length > 0 && after.at(-1).classList.contains("role-assistant") && !after.at(-1).classList.contains("streaming");
    },
    prompt,
    { timeout: STEP_TIMEOUT },
  );
}

/** Executables of the processes started under this test's HOME (the server's, by /proc). */
/** Run `command`, send it one JSON-RPC request line, close its stdin once answered, and return the
 * answer when the process has ended (it must end on its own when its stdin closes). */
function answerOnce(command, request, childEnv) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command[0], command.slice(1), { env: childEnv, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let answer;
    const timer = setTimeout(() => { child.kill(); reject(new Error(`no answer or no exit from ${command.join(" ")}: ${err}`)); }, 60_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (answer === undefined) reject(new Error(`${command.join(" ")} exited ${code} unanswered: ${err}`));
      else resolvePromise(answer);
    });
    child.stderr.on("data", (d) => (err += d));
    child.stdout.on("data", (d) => {
      out += d;
      for (const line of out.split("\n").slice(0, -1)) {
        const message = JSON.parse(line);
        if (message.id === request.id && answer === undefined) {
          answer = message;
          child.stdin.end(); // the editor leaves: the process must end on its own
        }
      }
    });
    child.on("error", (e) => { clearTimeout(timer); reject(e); });
    child.stdin.write(JSON.stringify(request) + "\n");
  });
}

function serverProcesses() {
  const found = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8");
      if (!environ.includes(`HOME=${dirs.home}\0`)) continue;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
      if (cmdline.some((a) => a.includes("chat-history-server") || a.includes("boot.py") || a.includes("chat_history"))) {
        const path = environ.split("\0").find((v) => v.startsWith("PATH="));
        found.push({ pid: Number(pid), exe: readlinkSync(`/proc/${pid}/exe`), cmdline, path });
      }
    } catch {
      // gone, or not ours
    }
  }
  return found;
}

/** A throwaway PostgreSQL cluster (tests/pgcluster.py serve): {url, bin, stop()}. */
async function startCluster(python) {
  const repo = resolve(here, "..", "..", "..");
  const child = spawn(python, ["-m", "tests.pgcluster", "serve"], { cwd: repo, stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  const line = await new Promise((res, rej) => {
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) res(out.split("\n")[0]);
    });
    child.once("exit", (code) => rej(new Error(`tests/pgcluster.py serve exited ${code}: ${out}`)));
  });
  const cluster = JSON.parse(line);
  const exited = new Promise((r) => child.once("exit", r));
  cluster.stop = async () => {
    child.stdin.end(); // the helper stops the postmaster by its PID and removes the folder
    await Promise.race([exited, sleep(30_000)]);
  };
  return cluster;
}

/** The one JSON value one query returns, run by psql as the test (never by the extension host). */
function psql(cluster, sql) {
  const r = spawnSync(join(cluster.bin, "psql"), [cluster.url, "-X", "-A", "-t", "-c", sql], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** Files under `folder` whose bytes contain `text`. */
function filesHolding(folder, text) {
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && readFileSync(path).includes(text)) found.push(path);
    }
  };
  walk(folder);
  return found;
}

const fake = await startFakeModelServer({ chunkDelayMs: 5 });
const cluster = POSTGRES ? await startCluster(POSTGRES) : null;
if (cluster) log(`PostgreSQL cluster: ${cluster.url}`);
let exitCode = 1;
try {
  writeFileSync(dirs.config, "bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n");
  mkdirSync(dirname(settingsFile), { recursive: true });
  writeFileSync(
    settingsFile,
    JSON.stringify(
      {
        "chatPanel.provider": "openai",
        "chatPanel.baseUrl": `${fake.url}/v1`,
        "chatPanel.model": "fake-model",
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": false,
        "security.workspace.trust.enabled": false,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": false,
        "extensions.autoUpdate": false,
        "update.mode": "none",
        ...(cluster ? { "chatPanel.database": cluster.url } : {}),
      },
      null,
      2,
    ),
  );
  const which = spawnSync("/bin/sh", ["-c", "command -v python3 python3.11 python3.12 python3.13 python3.14 python || true"], { env, encoding: "utf8" });
  log(`PATH=${env.PATH}; Pythons on it: ${which.stdout.trim().split("\n").filter(Boolean).join(", ") || "none"}`);
  assert.equal(/python3\.1[1-4]/.test(which.stdout), false, "no Python 3.11+ may be on PATH");

  await step("the .vsix installs into code-server (no pip, no pythonPath)", async () => {
    const r = spawnSync(
      process.execPath,
      [ENTRY, "--config", dirs.config, "--user-data-dir", dirs.userData, "--extensions-dir", dirs.extensions, "--install-extension", VSIX],
      { env, encoding: "utf8" },
    );
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /successfully installed/i);
  });

  await step("code-server starts and the workbench loads", async () => {
    await startCodeServer();
    await openWorkbench();
  });

  if (EXPECT === "works") {
    const prompt = "Hello from the installed vsix";
    await step("a chat turn works with the server inside the extension", async () => {
      await runCommand("Chat Panel: New Chat");
      const frame = await chatFrame();
      await send(frame, prompt);
      const reply = await frame.locator("article.role-assistant").last().innerText();
      assert.match(reply, /Reply #1 to: Hello from the installed vsix/);
      await page.screenshot({ path: join(ARTIFACTS, "01-turn.png") });
    });

    await step("the server running is the frozen one from the extension, not a Python", async () => {
      const running = serverProcesses();
      log(JSON.stringify(running.map((p) => ({ exe: p.exe, cmdline: p.cmdline.join(" ") }))));
      assert.ok(running.length >= 1, "a server process");
      for (const p of running) {
        assert.ok(p.exe.startsWith(dirs.extensions), `runs from the extension: ${p.exe}`);
        assert.match(p.exe, /\/server\/chat-history-server$/);
        // code-server puts its own remote-cli folder (the `code` command, no Python) in front.
        const entries = p.path.slice("PATH=".length).split(":").filter((e) => !e.endsWith("/bin/remote-cli"));
        assert.deepEqual(entries, [dirs.bin], `the extension host saw only the test's PATH: ${p.path}`);
      }
    });

    if (!PYTHON && !cluster) {
      await step("the frozen server runs `cli acp` in front of a real ACP agent (Codex's adapter) and `cli mcp`, with no Python", async () => {
        const exe = serverProcesses()[0].exe;
        const codex = join(here, "..", "..", "..", "tests", "acp-agents", "node_modules", "@zed-industries", "codex-acp-linux-x64", "bin", "codex-acp");
        const codexHome = join(dirs.home, ".codex");
        mkdirSync(codexHome, { recursive: true });
        const acp = await answerOnce(
          [exe, "cli", "--db", join(root, "agents.db"), "acp", "--", codex],
          { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } },
          { ...env, CODEX_HOME: codexHome },
        );
        assert.equal(acp.result?.agentInfo?.name, "codex-acp", JSON.stringify(acp));
        const caps = acp.result.agentCapabilities.sessionCapabilities;
        assert.ok(caps.delete && caps.fork, `the proxy adds what Codex lacks: ${JSON.stringify(caps)}`);
        const mcp = await answerOnce(
          // the storage folder by its variable: a --db that names no database yet is refused
          [exe, "cli", "mcp"],
          { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "install-check", version: "1" } } },
          { ...env, CHAT_HISTORY_STORAGE: root },
        );
        assert.equal(mcp.result?.serverInfo?.name, "chat-history", JSON.stringify(mcp));
      });
    }

    if (cluster) {
      await step("the turn is stored in the PostgreSQL database, not in the extension's SQLite storage", async () => {
        const rows = psql(cluster, "SELECT json_agg(json_build_object('role', role, 'content', content) ORDER BY id) FROM messages");
        log(JSON.stringify(rows));
        assert.deepEqual(rows.map((r) => r.role), ["user", "assistant"]);
        assert.equal(rows[0].content, prompt);
        assert.match(rows[1].content, /^Reply #1 to: Hello from the installed vsix/);
        // The SQLite store the server keeps in the extension's storage without a database.
        const stores = filesHolding(dirs.userData, prompt).filter((f) => /chat-history\.sqlite3/.test(f));
        assert.deepEqual(stores, [], "no SQLite store holds the turn");
      });
    }

    await step("history survives a restart of code-server", async () => {
      await closeBrowser();
      await stopCodeServer();
      await sleep(1000);
      assert.deepEqual(serverProcesses(), [], "the server stopped with code-server");
      await startCodeServer();
      await openWorkbench();
      await runCommand("Chat History: Focus on Conversations View");
      const row = page.locator(".monaco-list-row", { hasText: prompt }).first();
      await row.waitFor({ state: "visible" });
      await row.click();
      const frame = await chatFrame();
      await frame.waitForFunction(
        (text) => [...document.querySelectorAll("article.role-user .plain")].some((e) => e.textContent === text),
        prompt,
      );
      assert.match(await frame.locator("article.role-assistant").last().innerText(), /Reply #1 to/);
      await page.screenshot({ path: join(ARTIFACTS, "02-after-restart.png") });
      if (cluster) assert.equal(psql(cluster, "SELECT count(*) FROM messages"), 2, "nothing doubled by the restart");
    });

    await step("Export as JSONL runs the CLI through the same server inside the extension", async () => {
      await runCommand("Chat Panel: Export Conversation", { opensQuickInput: true });
      const pick = page.locator(".quick-input-list .monaco-list-row", { hasText: "JSONL" }).first();
      await pick.waitFor({ state: "visible" });
      await pick.click();
      const editor = page.locator(".editor-instance .monaco-editor .view-lines").first();
      // The export's header and the turn's two rows (the lines are wider than the editor).
      await page.waitForFunction(
        () =>
          [...document.querySelectorAll(".editor-instance .monaco-editor .view-lines")].some(
            (e) => e.textContent.includes('"format":"chat-history"') && e.textContent.split('"type":"message"').length === 3,
          ),
        undefined,
        { timeout: STEP_TIMEOUT },
      );
      assert.match(await editor.innerText(), /"conversationId"/);
      await page.screenshot({ path: join(ARTIFACTS, "03-export.png") });
    });
  } else if (EXPECT === "no-driver") {
    await step("a notification: no PostgreSQL driver here, what to do, and Open Settings shows the setting", async () => {
      const toast = page.locator(".notification-toast", { hasText: "no PostgreSQL driver" });
      await toast.first().waitFor({ state: "visible", timeout: STEP_TIMEOUT });
      const text = await toast.first().innerText();
      log(text.replace(/\n/g, " | "));
      assert.match(text, /database: the server inside this extension has no PostgreSQL driver for this platform \(Linux x86_64\)/);
      assert.match(text, /Remove the database to keep the history in SQLite here, or run the server with a Python 3\.11\+/);
      for (const label of ["Select Python…", "Open Settings", "Show Log"]) {
        assert.equal(await toast.first().locator(".monaco-button", { hasText: label }).count(), 1, label);
      }
      await page.screenshot({ path: join(ARTIFACTS, "01-no-driver.png") });
      await toast.first().locator(".monaco-button", { hasText: "Open Settings" }).click();
      // code-server is a remote window: machine-scoped settings are under its Remote tab.
      await page.locator(".settings-editor .settings-tabs-widget .action-label", { hasText: "Remote" }).first().click();
      await page.locator(".settings-editor .setting-item-title", { hasText: "Database" }).first().waitFor({ state: "visible" });
      await page.screenshot({ path: join(ARTIFACTS, "02-no-driver-settings.png") });
      // The failed start is not taken for a crash to restart from (the language client's own
      // "couldn't create connection" toast still shows: it forces it on any failed start).
      assert.equal(await page.locator(".notification-toast", { hasText: "Restarting server failed" }).count(), 0);
      // Each attempt (a later action retries) is refused at initialize and exits.
      for (let i = 0; serverProcesses().length > 0; i++) {
        assert.ok(i < 60, `no server keeps running: ${JSON.stringify(serverProcesses())}`);
        await sleep(500);
      }
    });
  } else {
    await step("one notification: the Python found is too old, with the three buttons", async () => {
      const toast = page.locator(".notification-toast", { hasText: "too old" });
      await toast.first().waitFor({ state: "visible", timeout: STEP_TIMEOUT });
      const text = await toast.first().innerText();
      log(text.replace(/\n/g, " | "));
      assert.match(text, /Python 3\.10\.\d+ .* is too old: the chat history server needs Python 3\.11 or newer/);
      for (const label of ["Select Python…", "Open Settings", "Show Log"]) {
        assert.equal(await toast.first().locator(".monaco-button", { hasText: label }).count(), 1, label);
      }
      await sleep(3000); // a second toast (the Conversations view's) would have shown by now
      assert.equal(await page.locator(".notification-toast", { hasText: "Chat history" }).count(), 1, "one notification");
      await page.screenshot({ path: join(ARTIFACTS, "01-too-old.png") });
      assert.deepEqual(serverProcesses(), [], "no server runs");
    });
  }
  exitCode = 0;
} catch {
  exitCode = 1;
} finally {
  await closeBrowser();
  await stopCodeServer();
  await fake.close?.();
  await cluster?.stop();
  if (!process.env.E2E_KEEP) rmSync(root, { recursive: true, force: true });
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(exitCode);
}
