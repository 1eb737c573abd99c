/**
 * End-to-end scenario of the sample chat panel in a real VS Code (code-server 4.100.3) driven by
 * headless Chromium (Debian's /usr/bin/chromium through playwright-core), against the scripted
 * fake model server (a test double, ./fake-model-server.mjs) and the real chat-history-server
 * (`python -m chat_history`, started by the extension through the shim).
 *
 *   node e2e/scenario.mjs --code-server BIN --vsix FILE --python PYTHON
 *
 * Each step prints "ok N - name" and saves a screenshot to e2e/artifacts/; the last line is
 * "N passed, N failed". With E2E_ONLY=REGEX only the steps whose names match run (after the
 * install): the scenarios that start their own window, such as E2E_ONLY=workspaces.
 */

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { startFakeModelServer } from "./fake-model-server.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);
const CODE_SERVER = resolve(args["code-server"]);
const VSIX = resolve(args.vsix);
const PYTHON = resolve(args.python);
const CHROMIUM = args.chromium ?? "/usr/bin/chromium";
const ARTIFACTS = resolve(args.artifacts ?? join(here, "artifacts"));
const EXTENSION_ID = "chat-history-examples.chat-panel";
const STEP_TIMEOUT = 60_000;
const API_KEY = "sk-e2e-not-a-real-key-7c1f";
const ONLY = process.env.E2E_ONLY ? new RegExp(process.env.E2E_ONLY) : null;

rmSync(ARTIFACTS, { recursive: true, force: true });
mkdirSync(ARTIFACTS, { recursive: true });
const root = mkdtempSync(join(tmpdir(), "chat-panel-e2e-"));
const dirs = {
  home: join(root, "home"),
  userData: join(root, "user-data"),
  extensions: join(root, "extensions"),
  workspace: join(root, "workspace"),
  config: join(root, "config.yaml"),
};
for (const d of [dirs.home, dirs.userData, dirs.extensions, dirs.workspace]) mkdirSync(d, { recursive: true });
const settingsFile = join(dirs.userData, "User", "settings.json");
const env = {
  ...process.env,
  HOME: dirs.home,
  XDG_CONFIG_HOME: join(dirs.home, ".config"),
  XDG_DATA_HOME: join(dirs.home, ".local", "share"),
  XDG_CACHE_HOME: join(dirs.home, ".cache"),
};
delete env.VSCODE_IPC_HOOK_CLI;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/**
 * Until the webview has painted what it drew and counts it as seen (main.ts: a view is seen two
 * animation frames after it was drawn, and a key or click carries the newest row seen). A key
 * pressed as soon as the new text is in the DOM, faster than a person can, would otherwise act
 * on the view before it, which the server rightly refuses as stale.
 */
const afterPaint = (f) => f.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => requestAnimationFrame(r)))));
const log = (...a) => console.log("#", ...a);
const started = Date.now();
const since = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;

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

// ---------------------------------------------------------------------------------------------
// code-server and the browser

let codeServer = null;
let browser = null;
let page = null;
let port = 0;
let serverLog = "";

async function startCodeServer() {
  port ||= await freePort(); // a restart keeps the address, as a person's bookmark does
  const child = spawn(
    CODE_SERVER,
    [
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
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.ok) return;
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
    // already gone
  }
}

async function openWorkbench(folder = dirs.workspace) {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT);
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(folder)}`);
  await page.waitForSelector(".monaco-workbench", { timeout: 90_000 });
  await page.waitForSelector(".activitybar", { timeout: 90_000 });
}

async function closeBrowser() {
  await browser?.close().catch(() => undefined);
  browser = null;
  page = null;
}

/** Runs a palette command; `opensQuickInput`: it shows its own QuickPick (the widget stays open). */
async function runCommand(title, { opensQuickInput = false } = {}) {
  // Until the extension host has registered the extension, its commands are missing from the
  // palette: reopen it until the command shows (up to a minute).
  const deadline = Date.now() + STEP_TIMEOUT;
  for (;;) {
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(">");
    // The palette matches the typed words against the title without its category.
    await page.keyboard.type(title.replace(/^[^:]*: /, ""), { delay: 5 });
    const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
    try {
      await row.waitFor({ state: "visible", timeout: 3000 });
    } catch (error) {
      const shown = await page.locator(".quick-input-list .monaco-list-row").allInnerTexts().catch(() => []);
      log(`runCommand: "${title}" not listed yet; the palette shows ${JSON.stringify(shown.slice(0, 5))} (value ${JSON.stringify(await input.inputValue().catch(() => "?"))})`);
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

/**
 * Chat Panel: New Chat, and its frame once it shows the empty chat. The palette's command runs
 * after the palette closes: a prompt typed before the panel shows the new chat goes to the chat
 * shown before, as it would for a person typing blind.
 */
async function newChat() {
  await runCommand("Chat Panel: New Chat");
  const f = await chatFrame();
  await f.waitForFunction(() => document.querySelectorAll("article.msg").length === 0 && document.querySelector("#messages .empty") !== null);
  return f;
}

/** The chat webview's inner frame (webviews are nested iframes). */
async function chatFrame(timeoutMs = STEP_TIMEOUT) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      try {
        // Drawn once (the empty-chat text or a message): its script runs and listens, so a
        // prompt typed now is sent (under load the page can show before its script has run).
        if ((await frame.$("#composer")) && (await frame.evaluate(() => document.getElementById("messages").childElementCount > 0))) return frame;
      } catch {
        // detached while looking
      }
    }
    await sleep(200);
  }
  throw new Error("the chat webview did not appear");
}

async function shot(name, { editorOnly = false } = {}) {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
  // The editor area alone, small enough for the README (examples/chat-panel/media/).
  if (editorOnly) await page.locator(".part.editor").screenshot({ path: join(ARTIFACTS, `${name}-panel.png`) });
}

/**
 * Waits for `row` in a window that has just loaded. Seen in three of five full runs, at a reload
 * in quick succession ("a reload right after a word"): code-server hands the reloaded window's extension host no user settings at all
 * (the panel logs `chatPanel.pythonPath is not set` although settings.json holds it, and no
 * configuration change follows), so the panel rightly says its server could not start. A person
 * reloads once more; so does this, at most twice, and says so.
 */
async function undeliveredSettings(row) {
  const sidebar = page.locator("#workbench\\.parts\\.sidebar");
  for (let reloads = 0; ; reloads++) {
    const failed = sidebar.getByText("could not start", { exact: false }).first();
    await row.or(failed).first().waitFor({ state: "visible" });
    if (await row.isVisible()) return;
    assert.ok(reloads < 2, "the reloaded window's server could not start, twice");
    assert.match(readFileSync(settingsFile, "utf8"), /"chatPanel\.pythonPath"/, "settings.json names the interpreter");
    log("the reloaded window got no user settings from code-server (its server could not start); reloading it once more");
    await page.reload();
    await page.waitForSelector(".monaco-workbench", { timeout: 90_000 });
    await showChatList();
  }
}

/**
 * Opens the conversation whose list row holds `text` in a window that has just loaded, and
 * returns its chat frame. A row clicked while that window's list is still refreshing is a stale
 * item (VS Code logs "command not found" and opens nothing): clicked again until the panel shows.
 */
async function openFromFreshList(text) {
  for (let attempt = 1; ; attempt++) {
    const row = page.locator(".monaco-list-row", { hasText: text }).first();
    await undeliveredSettings(row);
    await row.click();
    try {
      return await chatFrame(attempt < 4 ? 10_000 : STEP_TIMEOUT);
    } catch (error) {
      if (attempt >= 4) throw error;
      log(`the list row "${text}" opened nothing (a stale item); clicking it again`);
    }
  }
}

const assistantCount = (frame) => frame.locator("article.role-assistant").count();

/** Types a prompt into the panel, sends it, and waits until the turn is over. */
async function send(frame, prompt, { expectStreaming = false } = {}) {
  if (expectStreaming) {
    // Record every partial reply the page shows while the streaming cursor is on.
    await frame.evaluate(() => {
      window.__partials = [];
      new MutationObserver(() => {
        const streaming = document.querySelector("article.msg.streaming .body");
        if (streaming) window.__partials.push(streaming.textContent);
      }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
    });
  }
  await frame.fill("#prompt", prompt);
  await frame.press("#prompt", "Enter");
  let sawStreaming = null;
  // Done: not busy, the prompt is the last user row, and a finished assistant row follows it.
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
  if (expectStreaming) sawStreaming = await frame.evaluate(() => window.__partials);
  return sawStreaming;
}

/** Waits until the panel is idle with `prompt` as the last user row and a finished reply after it. */
async function waitTurn(frame, prompt) {
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

const userTexts = (frame) => frame.locator("article.role-user .plain").allInnerTexts();

/** Clicks a message's action button (Edit, Regenerate, Fork, Delete…) on the article holding `text`. */
async function messageAction(frame, role, text, label) {
  const article = frame.locator(`article.role-${role}`, { hasText: text }).last();
  await article.hover();
  await article.locator("button.action", { hasText: label }).click();
}

const sidebarAction = (label) => page.locator(`#workbench\\.parts\\.sidebar .action-label[aria-label="${label}"]`).first();
/**
 * Shows the chat list. Clicking the activity bar's item toggles the sidebar, so a click while
 * the workbench is still restoring the list (after a reload) can close it: click only while
 * the item is not the active one (or it stayed active with no list for two looks), and look
 * again until the list shows.
 */
async function showChatList() {
  const deadline = Date.now() + STEP_TIMEOUT;
  const item = page.locator('.activitybar li.action-item:has([aria-label^="Chat History"])').first();
  for (let idle = 0; !(await sidebarAction("New Chat").isVisible().catch(() => false)); ) {
    if (Date.now() > deadline) throw new Error("the chat list did not show within the step's time");
    const active = await item.evaluate((e) => e.classList.contains("checked")).catch(() => false);
    if (!active || ++idle > 2) {
      await item.click();
      idle = 0;
    }
    await sidebarAction("New Chat").waitFor({ state: "visible", timeout: 3000 }).catch(() => {});
  }
}

/** Fills VS Code's input box (showInputBox) and accepts it. */
async function answerInputBox(value) {
  const box = page.locator(".quick-input-widget input");
  await box.waitFor({ state: "visible" });
  await box.fill(value);
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget").waitFor({ state: "hidden" });
}

/**
 * The input of setting `key` in the Settings UI after searching for it: the top result, once its
 * label is the key's (the search may also list fuzzy matches, such as a terminal setting).
 */
async function settingInput(key) {
  const last = key.split(".").pop().replace(/([a-z])([A-Z])/g, "$1 $2");
  const label = last[0].toUpperCase() + last.slice(1);
  const top = page.locator(".settings-editor .setting-item-contents").first();
  await top.locator(".setting-item-label", { hasText: label }).waitFor({ state: "visible" });
  const input = top.locator("input").first();
  await input.waitFor({ state: "visible" });
  return input;
}

/** Sets a number setting in the Settings UI (as a person does) and waits until settings.json has it. */
async function setInSettingsUI(key, value) {
  await runCommand("Preferences: Open User Settings");
  await page.locator(".settings-editor .suggest-input-container").first().waitFor({ state: "visible" });
  await sleep(500);
  await page.keyboard.press("Control+A");
  await page.keyboard.type(key);
  const input = await settingInput(key);
  await input.fill(String(value));
  await input.press("Tab");
  const pattern = new RegExp(`"${key.replace(/\./g, "\\.")}": ${String(value).replace(/\./g, "\\.")}\\b`);
  const deadline = Date.now() + 20_000;
  while (!pattern.test(readFileSync(settingsFile, "utf8"))) {
    assert.ok(Date.now() < deadline, `settings.json never got ${key}:\n${readFileSync(settingsFile, "utf8")}`);
    await sleep(200);
  }
}

const lastAssistantText = (frame) => frame.locator("article.role-assistant").last().locator(".body").innerText();
const noticeTexts = (frame) => frame.locator(".notice-text").allInnerTexts();

/** PIDs of `python -m chat_history` processes started for this test (their HOME is the test's). */
function historyServers() {
  const pids = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      // (not the launch check, `-m chat_history --check`, which exits at once)
      if (!(cmdline.includes("-m") && cmdline.includes("chat_history")) || cmdline.includes("--check")) continue;
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      if (environ.includes(`HOME=${dirs.home}`)) pids.push(Number(pid));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

async function waitFor(what, check, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

// ---------------------------------------------------------------------------------------------
// Steps

const results = [];
async function step(name, body, { always = false } = {}) {
  if (ONLY && !always && !ONLY.test(name)) {
    console.log(`skip - ${name}`);
    return;
  }
  const t0 = Date.now();
  try {
    await body();
    results.push({ name, ok: true });
    console.log(`ok ${results.length} - ${name} (${((Date.now() - t0) / 1000).toFixed(1)}s, at ${since()})`);
  } catch (error) {
    results.push({ name, ok: false });
    console.log(`not ok ${results.length} - ${name}`);
    console.log(String(error?.stack ?? error).split("\n").map((l) => `#   ${l}`).join("\n"));
    if (page) await shot(`FAILED-${results.length}`).catch(() => undefined);
    throw error;
  }
}

const fake = await startFakeModelServer();
let exitCode = 1;
try {
  writeFileSync(join(dirs.workspace, "hello.txt"), "Hello from the e2e workspace file.\nSecond line.\n");
  writeFileSync(join(root, "secret.txt"), "outside the workspace\n");
  writeFileSync(dirs.config, "bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n");
  mkdirSync(dirname(settingsFile), { recursive: true });
  writeFileSync(
    settingsFile,
    JSON.stringify(
      {
        "chatPanel.pythonPath": PYTHON,
        "chatPanel.provider": "openai",
        "chatPanel.baseUrl": `${fake.url}/v1`,
        "chatPanel.model": "fake-model",
        "chatPanel.pageSize": 6,
        "chatHistory.maxMessages": 10,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": false,
        "workbench.enableExperiments": false,
        "security.workspace.trust.enabled": false,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": false,
        "extensions.autoUpdate": false,
        "update.mode": "none",
      },
      null,
      2,
    ),
  );

  await step("the .vsix installs into code-server", async () => {
    const r = spawnSync(
      CODE_SERVER,
      ["--config", dirs.config, "--user-data-dir", dirs.userData, "--extensions-dir", dirs.extensions, "--install-extension", VSIX],
      { env, encoding: "utf8" },
    );
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /successfully installed/i);
  }, { always: true });

  await step("code-server starts and the workbench loads", async () => {
    await startCodeServer();
    await openWorkbench();
    await shot("01-workbench");
  });

  let frame;
  await step("New Chat opens the panel; a prompt streams a reply", async () => {
    frame = await newChat();
    const partials = await send(frame, "Hello, who are you?", { expectStreaming: true });
    const reply = await lastAssistantText(frame);
    assert.match(reply, /Reply #1 to: Hello, who are you\?/);
    // The reply grew in front of the person: several partial texts, each a prefix of the next.
    const distinct = [...new Set(partials.filter((p) => p !== ""))];
    assert.ok(distinct.length >= 3, `streamed in steps: ${JSON.stringify(distinct)}`);
    for (let i = 1; i < distinct.length; i++) assert.ok(distinct[i].startsWith(distinct[i - 1]), JSON.stringify(distinct));
    assert.ok(distinct[0].length < reply.length);
    // Markdown rendered as elements, not as characters.
    assert.equal(await frame.locator("article.role-assistant").last().locator("li").count(), 2);
    assert.equal(fake.requests.length, 1);
    assert.equal(fake.requests[0].body.stream, true);
    assert.deepEqual(fake.requests[0].body.tools.map((t) => t.function.name), ["read_file"]);
    await frame.waitForSelector("#meter:not([hidden])");
    await shot("02-streamed-reply");
  });

  let meterBefore = "";
  await step("an API key set with Set API Key goes to the model as a header (SecretStorage)", async () => {
    assert.equal(fake.requests[0].headers.authorization, undefined, "no key yet, no header");
    await runCommand("Chat Panel: Set API Key");
    const box = page.locator('.quick-input-widget input[type="password"]');
    await box.waitFor({ state: "visible" });
    await box.fill(API_KEY);
    await page.keyboard.press("Enter");
    await page.locator(".quick-input-widget").waitFor({ state: "hidden" });
    await page.locator(".tabs-container .tab", { hasText: "Hello, who are you?" }).first().click();
  });

  await step("a tool call runs read_file in the workspace; shown collapsed with its result", async () => {
    await send(frame, "Please read hello.txt and tell me what it says.");
    assert.equal(fake.requests.at(-1).headers.authorization, `Bearer ${API_KEY}`);
    const reply = await lastAssistantText(frame);
    assert.match(reply, /The file says: Hello from the e2e workspace file\./);
    const call = frame.locator("details.tool-call").last();
    assert.equal(await call.getAttribute("open"), null, "collapsed");
    assert.match(await call.locator("summary").innerText(), /read_file/);
    await call.locator("summary").click();
    assert.match(await call.locator(".tool-result").innerText(), /Hello from the e2e workspace file\./);
    assert.match(await call.locator(".tool-args").innerText(), /"path": "hello.txt"/);
    // The model got the tool result in the second request, paired with its call.
    const second = fake.requests[fake.requests.length - 1].body.messages;
    const toolRow = second.find((m) => m.role === "tool");
    assert.equal(toolRow.tool_call_id, "call_fake_1");
    meterBefore = await frame.locator("#meter-label").innerText();
    await shot("03-tool-call", { editorOnly: true });
  });

  await step("raw HTML and a javascript: link from a user and a model are rendered inert", async () => {
    const evil = 'Look: <img src=x onerror="window.__pwned=1"> and [click me](javascript:window.__pwned=2) or [docs](https://example.com/docs) [echo]';
    await send(frame, evil);
    const state = await frame.evaluate(() => ({
      imgs: document.querySelectorAll("img").length,
      pwned: window.__pwned ?? null,
      jsLinks: [...document.querySelectorAll("a")].filter((a) => !/^https?:|^mailto:/.test(a.href)).length,
      safeLinks: [...document.querySelectorAll("a")].map((a) => a.href),
      inert: [...document.querySelectorAll(".inert-link")].map((s) => s.textContent),
      userText: [...document.querySelectorAll("article.role-user .plain")].map((p) => p.textContent).pop(),
      assistantText: [...document.querySelectorAll("article.role-assistant .body")].map((p) => p.textContent).pop(),
    }));
    assert.equal(state.imgs, 0, "no <img> element exists");
    assert.equal(state.pwned, null, "no handler ran");
    assert.equal(state.jsLinks, 0, "no javascript: link");
    assert.ok(state.safeLinks.includes("https://example.com/docs"), `the https link stays a link: ${state.safeLinks}`);
    assert.ok(state.inert.includes("click me"), "the javascript: link is inert text");
    assert.ok(state.userText.includes('<img src=x onerror="window.__pwned=1">'), "the user's text is shown as typed");
    assert.ok(state.assistantText.includes('<img src=x onerror="window.__pwned=1">'), "the model's text is shown as characters");
    // The page runs under a strict policy: nothing but the nonce'd script, no inline handlers.
    const csp = await frame.evaluate(() => document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.getAttribute("content") ?? "");
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'nonce-[A-Za-z0-9_-]{16,}'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    await shot("04-inert-html");
  });

  await step("a context-length error is retried once with overflowRecovery", async () => {
    const before = fake.requests.length;
    await send(frame, "A long question [overflow]");
    assert.equal(fake.requests.length, before + 2, "one refused request, one retry");
    const [refused, retried] = fake.requests.slice(before).map((r) => r.body.messages);
    assert.ok(retried.length < refused.length, `the retry sent less history (${retried.length} < ${refused.length} rows)`);
    assert.match(retried.map((m) => JSON.stringify(m.content)).join(" "), /earlier turns omitted/);
    assert.match(await lastAssistantText(frame), /Reply #\d+ to: A long question \[overflow\]/);
    const notices = await noticeTexts(frame);
    assert.ok(notices.some((t) => /trying once more/.test(t)), notices.join(" | "));
    assert.ok(notices.some((t) => /earlier messages? not sent after the model reported its context was full/.test(t)), notices.join(" | "));
    await shot("05-overflow-retry");
  });

  await step("storage retention (maxMessages 10) deletes old turns: notice, panel and meter follow", async () => {
    // 2 + 4 + 2 + 2 rows so far; this turn makes 12 > 10, so the oldest turn goes.
    await send(frame, "One more question to pass the message limit.");
    await frame.waitForFunction(() =>
      [...document.querySelectorAll(".notice-text")].some((n) => /deleted by your retention settings/.test(n.textContent)),
    );
    const notices = await noticeTexts(frame);
    assert.ok(notices.some((t) => /^2 messages deleted by your retention settings \(message limit\)/.test(t)), notices.join(" | "));
    await frame.waitForFunction(() => !document.body.innerText.includes("Reply #1 to: Hello, who are you?"));
    const meterAfter = await frame.locator("#meter-label").innerText();
    assert.notEqual(meterAfter, meterBefore, "the meter changed");
    await shot("06-storage-trim");
  });

  await step("a setting changed in the Settings UI reaches the server: the next prepare obeys it", async () => {
    // The chat's tab carries the server's title, which followed retention: read it while shown.
    const chatTitle = await frame.locator("#title").innerText();
    await runCommand("Preferences: Open User Settings");
    // The Settings editor opens with its search box focused.
    await page.locator(".settings-editor .suggest-input-container").first().waitFor({ state: "visible" });
    await sleep(500);
    await page.keyboard.type("chatHistory.context.maxHistoryTurns");
    const input = page.locator('.settings-editor .setting-item-number input, .settings-editor .setting-item-contents input[type="number"]').first();
    await input.waitFor({ state: "visible" });
    await page.locator(".settings-editor .settings-count-widget", { hasText: "1 Setting Found" }).waitFor();
    await input.fill("1");
    await input.press("Tab");
    await shot("07-settings-ui");
    // The Settings UI wrote it...
    const deadline = Date.now() + 20_000;
    while (!/"chatHistory\.context\.maxHistoryTurns": 1\b/.test(readFileSync(settingsFile, "utf8"))) {
      assert.ok(Date.now() < deadline, `settings.json never got the value:\n${readFileSync(settingsFile, "utf8")}`);
      await sleep(200);
    }
    // ...and the server uses it for the next request. Back to the chat's editor tab:
    await page.locator(".tabs-container .tab", { hasText: chatTitle }).first().click();
    frame = await chatFrame();
    const before = fake.requests.length;
    await send(frame, "Which turns do you see now?");
    const sent = fake.requests[before].body.messages;
    const users = sent.filter((m) => m.role === "user" && !/earlier turns omitted/.test(JSON.stringify(m.content)));
    assert.equal(users.length, 1, `only the newest turn is sent: ${JSON.stringify(sent)}`);
    const notices = await noticeTexts(frame);
    assert.ok(notices.some((t) => /earlier messages? not sent by the turn limit/.test(t)), notices.join(" | "));
    await shot("08-request-trim", { editorOnly: true });
    // The API key is in no setting and in no history file.
    const store = join(dirs.userData, "User", "globalStorage", EXTENSION_ID);
    for (const file of [settingsFile, ...["chat-history.sqlite3", "chat-history.sqlite3-wal"].map((f) => join(store, f))]) {
      if (existsSync(file)) assert.ok(!readFileSync(file).includes(API_KEY), `${file} holds the API key`);
    }
    assert.ok(existsSync(join(store, "chat-history.sqlite3")), "the history database is in the extension's global storage");
  });

  let title = "";
  await step("code-server restarts: the conversation is still there, newest page first, older pages on scroll", async () => {
    title = await frame.locator("#title").innerText();
    const storedAssistants = await assistantCount(frame);
    // One window, one history server; stopping code-server leaves no server behind.
    assert.equal(historyServers().length, 1, `history servers: ${historyServers()}`);
    await closeBrowser();
    await stopCodeServer();
    await waitFor("the history server to exit with code-server", () => historyServers().length === 0);
    await startCodeServer();
    await openWorkbench();
    await showChatList();
    const item = page.locator(".monaco-list-row", { hasText: title }).first();
    await item.waitFor({ state: "visible" });
    await shot("09-conversation-list");
    await item.click();
    frame = await chatFrame();
    await frame.waitForSelector("article.role-assistant");
    assert.equal(await frame.locator("#title").innerText(), title);
    assert.match(await lastAssistantText(frame), /Reply #\d+ to: Which turns do you see now\?/);
    // pageSize 6: not everything is loaded at first.
    const firstPage = await frame.locator("article.msg").count();
    assert.ok(await frame.locator(".older").count() === 1, "more history is announced");
    // Scroll up as a person does (the wheel over the list), until the top is reached.
    await frame.locator("#messages").hover();
    for (let i = 0; i < 20 && (await frame.locator("article.msg").count()) === firstPage; i++) {
      await page.mouse.wheel(0, -400);
      await sleep(250);
    }
    await frame.waitForFunction((n) => document.querySelectorAll("article.msg").length > n, firstPage, { timeout: 20_000 });
    await shot("10-after-restart");
    assert.ok((await assistantCount(frame)) <= storedAssistants + 1);
  });

  await step("Delete Conversation (the list's trash button, confirmed) clears it everywhere", async () => {
    const item = page.locator(".monaco-list-row", { hasText: title }).first();
    await item.hover();
    await item.locator('.action-label[aria-label="Delete Conversation"]').click();
    const dialog = page.locator(".monaco-dialog-box");
    await dialog.waitFor({ state: "visible" });
    // The server's automatic title: the first stored prompt (retention deleted "Hello, who are you?").
    assert.ok((await dialog.innerText()).includes(`Delete the conversation "${title}" for good?`), await dialog.innerText());
    await shot("11-delete-confirm");
    await dialog.locator(".monaco-button", { hasText: "Delete" }).first().click();
    await page.locator(".welcome-view-content", { hasText: "No conversations in this workspace yet." }).waitFor();
    // The panel showed it: it is now a new, empty chat.
    await frame.waitForSelector(".empty");
    assert.equal(await frame.locator("article.msg").count(), 0);
    await shot("12-deleted");
  });


  // --- Version 2: server titles, edits, fork, search, compaction --------------------------------
  const listRow = (text) => page.locator(".monaco-list-row", { hasText: text }).first();

  await step("a fresh chat takes the server's automatic title; Rename (updateConversation) renames it in list and panel", async () => {
    for (const fruit of ["apples", "bananas", "cherries"]) await send(frame, `Tell me about ${fruit}`);
    await listRow("Tell me about apples").waitFor({ state: "visible" });
    await frame.waitForFunction(() => document.getElementById("title").textContent === "Tell me about apples");
    const item = listRow("Tell me about apples");
    await item.hover();
    await item.locator('.action-label[aria-label="Rename Conversation"]').click();
    await answerInputBox("Fruit talk");
    await listRow("Fruit talk").waitFor({ state: "visible" });
    await frame.waitForFunction(() => document.getElementById("title").textContent === "Fruit talk");
    // One store of titles: the server's. The panel keeps no titles file.
    assert.ok(!existsSync(join(dirs.userData, "User", "globalStorage", EXTENSION_ID, "titles.json")));
    await shot("13-renamed", { editorOnly: false });
  });

  /** The `i/n` beside the last article of `role` holding `text` (null: no variant arrows). */
  const variantOf = async (role, text) => {
    const count = frame.locator(`article.role-${role}`, { hasText: text }).last().locator(".branch-count");
    return (await count.count()) === 0 ? null : count.innerText();
  };
  const replyBodies = () => frame.evaluate(() => [...document.querySelectorAll("article.role-assistant .body")].map((b) => b.textContent));

  await step("Edit and resend: a sibling prompt (‹ 2/2 ›) is answered; the old prompt and its turns stay stored, a variant away", async () => {
    await messageAction(frame, "user", "Tell me about bananas", "Edit");
    await answerInputBox("Tell me about blueberries");
    await waitTurn(frame, "Tell me about blueberries");
    assert.deepEqual(await userTexts(frame), ["Tell me about apples", "Tell me about blueberries"]);
    const sent = JSON.stringify(fake.requests.at(-1).body.messages);
    assert.ok(!/bananas|cherries/.test(sent), `the other branch is not sent: ${sent}`);
    // Version 5: a branch, nothing truncated: the edited prompt is the second of two variants.
    await frame.waitForFunction(() => [...document.querySelectorAll("article.role-user")].at(-1)?.querySelector(".branch-count")?.textContent === "2/2");
    const prompt = frame.locator("article.role-user", { hasText: "Tell me about blueberries" }).last();
    assert.equal(await prompt.locator("button.branch-prev").isDisabled(), false, "‹ leads to the first variant");
    assert.equal(await prompt.locator("button.branch-next").isDisabled(), true, "› : this is the last");
    assert.equal(await variantOf("user", "Tell me about apples"), null, "a row without variants has no arrows");
    await shot("14-edit-and-resend", { editorOnly: true });
  });

  await step("branches: ‹ on the edited prompt shows the first variant (bananas, then cherries) again; › comes back", async () => {
    await frame.locator("article.role-user", { hasText: "Tell me about blueberries" }).last().locator("button.branch-prev").click();
    await frame.waitForFunction(() => document.body.innerText.includes("Tell me about cherries") && !document.body.innerText.includes("Tell me about blueberries"));
    assert.deepEqual(await userTexts(frame), ["Tell me about apples", "Tell me about bananas", "Tell me about cherries"], "nothing was truncated");
    assert.equal(await variantOf("user", "Tell me about bananas"), "1/2");
    await shot("80-edit-first-variant", { editorOnly: true });
    await frame.locator("article.role-user", { hasText: "Tell me about bananas" }).last().locator("button.branch-next").click();
    await frame.waitForFunction(() => document.body.innerText.includes("Tell me about blueberries") && !document.body.innerText.includes("Tell me about cherries"));
    assert.equal(await variantOf("user", "Tell me about blueberries"), "2/2");
  });

  let firstReply = "";
  let secondReply = "";
  await step("Regenerate: a new answer to the same prompt, shown as the reply's ‹ 2/2 ›; the first one stays stored", async () => {
    const lastReply = () => frame.evaluate(() => [...document.querySelectorAll("article.role-assistant .body")].at(-1)?.textContent ?? "");
    const before = await lastReply();
    firstReply = before;
    const requests = fake.requests.length;
    await messageAction(frame, "assistant", "Tell me about blueberries", "Regenerate");
    await frame.waitForFunction(
      (old) => {
        const rows = [...document.querySelectorAll("article.role-assistant:not(.streaming) .body")];
        return !document.body.classList.contains("busy") && rows.length > 0 && rows.at(-1).textContent !== old;
      },
      before,
    );
    const after = await lastAssistantText(frame);
    secondReply = (await replyBodies()).at(-1);
    assert.notEqual(after, before);
    assert.match(after, /Reply #\d+ to: Tell me about blueberries/);
    assert.equal(fake.requests.length, requests + 1);
    assert.deepEqual(await userTexts(frame), ["Tell me about apples", "Tell me about blueberries"], "the prompt is not stored twice");
    assert.equal(await frame.locator("article.role-assistant").count(), 2);
    await frame.waitForFunction(() => [...document.querySelectorAll("article.role-assistant")].at(-1)?.querySelector(".branch-count")?.textContent === "2/2");
    await shot("15-regenerated", { editorOnly: true });
  });

  await step("branches: ‹ on the regenerated reply shows the first reply; after a reload of the window it is still the one shown", async () => {
    await frame.locator("article.role-assistant").last().locator("button.branch-prev").click();
    await frame.waitForFunction((text) => [...document.querySelectorAll("article.role-assistant .body")].at(-1)?.textContent === text, firstReply);
    assert.equal(await variantOf("assistant", "Tell me about blueberries"), "1/2");
    assert.equal(await frame.locator("article.role-assistant").count(), 2);
    await shot("81-regenerate-first-reply", { editorOnly: true });
    await page.reload();
    await page.waitForSelector(".monaco-workbench", { timeout: 90_000 });
    await openFromList("Fruit talk");
    await frame.waitForFunction((text) => [...document.querySelectorAll("article.role-assistant .body")].at(-1)?.textContent === text, firstReply);
    assert.equal(await variantOf("assistant", "Tell me about blueberries"), "1/2");
    assert.deepEqual(await userTexts(frame), ["Tell me about apples", "Tell me about blueberries"]);
    await shot("82-branch-after-reload", { editorOnly: true });
  });

  await step("branches: on the focused reply Alt+Right and Alt+Left switch variants (the keyboard stays on it)", async () => {
    const reply = frame.locator("article.role-assistant").last();
    await reply.focus();
    await page.keyboard.press("Alt+ArrowRight");
    await frame.waitForFunction((text) => [...document.querySelectorAll("article.role-assistant .body")].at(-1)?.textContent === text, secondReply);
    assert.equal(await variantOf("assistant", "Tell me about blueberries"), "2/2");
    // The focus came back to the reply drawn anew, so the next key goes on switching.
    await frame.waitForFunction(() => Boolean(document.activeElement?.closest("article.role-assistant")));
    await afterPaint(frame);
    await page.keyboard.press("Alt+ArrowLeft");
    await frame.waitForFunction((text) => [...document.querySelectorAll("article.role-assistant .body")].at(-1)?.textContent === text, firstReply);
    assert.equal(await variantOf("assistant", "Tell me about blueberries"), "1/2");
    assert.ok(page.url().includes(`127.0.0.1:${port}`), "the workbench did not navigate (Alt+Left is not Back here)");
    await shot("83-alt-left-switched", { editorOnly: true });
    // Back to the newest reply for the steps that follow.
    await afterPaint(frame);
    await page.keyboard.press("Alt+ArrowRight");
    await frame.waitForFunction((text) => [...document.querySelectorAll("article.role-assistant .body")].at(-1)?.textContent === text, secondReply);
  });

  await step("Fork from here: a new conversation with the rows through that message opens", async () => {
    await messageAction(frame, "assistant", "Tell me about apples", "Fork");
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 2 && !document.body.innerText.includes("blueberries"));
    assert.deepEqual(await userTexts(frame), ["Tell me about apples"]);
    await page.locator("#workbench\\.parts\\.sidebar .monaco-list-row").nth(1).waitFor({ state: "visible" });
    assert.equal(await page.locator("#workbench\\.parts\\.sidebar .monaco-list-row").count(), 2, "the fork is listed beside Fruit talk");
    await shot("16-forked");
  });

  await step("Search: hits highlighted; opening one shows its conversation at that message", async () => {
    await frame.fill("#search", "blueberries");
    await frame.press("#search", "Enter");
    const hit = frame.locator("#search-results button.hit").first();
    await hit.waitFor({ state: "visible" });
    const marks = await frame.locator("#search-results mark").allInnerTexts();
    assert.ok(marks.length >= 2 && marks.every((m) => m.toLowerCase() === "blueberries"), JSON.stringify(marks));
    assert.match(await hit.locator(".hit-title").innerText(), /Fruit talk/);
    await shot("17-search", { editorOnly: true });
    await hit.click();
    await frame.waitForFunction(() => document.getElementById("title").textContent === "Fruit talk");
    const focused = frame.locator("article.msg.focus");
    await focused.waitFor({ state: "visible" });
    assert.match(await focused.innerText(), /blueberries/);
    await shot("18-search-opened", { editorOnly: true });
  });

  await step("Delete exchange: the turn's rows go (deleteTurns), in the panel and after reopening", async () => {
    await messageAction(frame, "user", "Tell me about apples", "Delete");
    await frame.waitForFunction(() => !document.body.innerText.includes("Tell me about apples"));
    await listRow("Fruit talk").click();
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 2);
    assert.deepEqual(await userTexts(frame), ["Tell me about blueberries"]);
    await shot("19-deleted-exchange", { editorOnly: true });
  });

  await step("Compaction: prepare's proposal is sent to the model in the background, saved, shown with Undo; Undo deletes the summary", async () => {
    // Propose early: the trigger at 0.1% of the 32,000-token budget (set in the Settings UI, which
    // reaches the server live); keepRecentTurns stays 4, so the fifth turn brings the proposal.
    await setInSettingsUI("chatHistory.context.compaction.triggerRatio", 0.001);
    await page.locator(".tabs-container .tab", { hasText: "Fruit talk" }).first().click();
    frame = await chatFrame();
    const banner = frame.locator("#summary:not([hidden])", { hasText: "summarized" });
    const compactionDone = () => frame.waitForFunction(() => document.getElementById("summary").dataset.compacting !== "true", null, { timeout: 30_000 });
    for (const fruit of ["dates", "elderberries", "figs", "grapes", "kiwis", "lemons"]) {
      await send(frame, `Tell me about ${fruit}`);
      // A compaction starts as the turn ends (the view says so): let it finish before the next
      // turn, so retention (maxMessages 10) cannot delete the rows it covers first.
      await compactionDone();
      if ((await banner.count()) > 0) break;
    }
    await banner.waitFor({ state: "visible", timeout: 30_000 });
    assert.ok(fake.compactions >= 1, "the compaction request went to the model");
    assert.ok(await frame.locator("#undo-summary").isVisible());
    await shot("20-compacted", { editorOnly: true });
    // (That the next request carries the summary is tested against the real server in
    // test/chat.test.ts: here one more turn would pass maxMessages 10, and retention deleting the
    // covered turn stops the server sending the summary; see the README.)
    const summarized = fake.requests.filter((r) => JSON.stringify(r.body).includes("Summarize the conversation above"));
    assert.match(JSON.stringify(summarized.at(-1).body.messages), /Tell me about (blueberries|dates|elderberries)/, "older turns went to the model to be summarized");
    await frame.locator("#undo-summary").click();
    await frame.locator("#summary").waitFor({ state: "hidden" });
    const notices = await noticeTexts(frame);
    assert.ok(notices.some((t) => /Summary removed/.test(t)), notices.join(" | "));
    await shot("21-compaction-undone", { editorOnly: true });
  });

  // --- Version 3 (issue 25): interrupted streams, fork from a call, redaction, two windows -------
  const noticeShown = (f, pattern) =>
    f.waitForFunction((source) => [...document.querySelectorAll(".notice-text")].some((n) => new RegExp(source).test(n.textContent)), pattern.source);
  const clickNoticeAction = (f, label) => f.locator(".notice button.notice-action", { hasText: label }).first().click();

  const cutPrompt = "Please read hello.txt [cut-tool]";
  await step("New Chat (the list's +, typed at once) focuses the prompt box; a stream cut inside a tool call is an interrupted reply in words, saved, with Continue, Retry and Keep; Retry answers without a second prompt", async () => {
    // The focus in the panel (a click on its header, as a person reading the chat), then the
    // list's + and typing at once: every key lands in the prompt box.
    const newChatButton = page.locator('#workbench\\.parts\\.sidebar .action-label[aria-label="New Chat"]').first();
    if (!(await newChatButton.isVisible().catch(() => false))) await page.locator('.activitybar [aria-label^="Chat History"]').first().click();
    await newChatButton.waitFor({ state: "visible" });
    await frame.locator("#title").click();
    await newChatButton.click();
    await page.keyboard.type(cutPrompt, { delay: 20 });
    await waitFor("the prompt typed at once in the prompt box", async () => (await frame.evaluate(() => document.getElementById("prompt").value)) === cutPrompt, 5_000);
    await page.keyboard.press("Enter");
    await noticeShown(frame, /connection to the model closed in the middle of the reply/);
    await frame.waitForFunction(() => !document.body.classList.contains("busy"));
    const text = await frame.locator("#messages").innerText();
    assert.ok(!/running…/.test(text), `no call is shown as running: ${text}`);
    assert.ok(!/terminated/.test(await frame.locator("#notices").innerText()), "the notice is in words");
    assert.equal(await frame.locator("article.msg.interrupted").count(), 1, "the partial reply is shown, marked");
    // Version 4: what arrived is stored (interrupted), without the half-written call.
    assert.match(await frame.locator("article.msg.interrupted").innerText(), /Let me look\.[\s\S]*Interrupted: saved as far as it got/);
    assert.deepEqual(await frame.locator(".notice button.notice-action").allInnerTexts(), ["Continue", "Retry", "Keep"]);
    await shot("22-stream-cut", { editorOnly: true });
    await clickNoticeAction(frame, "Retry");
    // The interrupted bubble goes as the retry starts (until then the old view looks finished).
    await frame.waitForFunction(() => document.querySelectorAll("article.msg.interrupted").length === 0);
    await waitTurn(frame, cutPrompt);
    assert.deepEqual(await userTexts(frame), [cutPrompt], "the prompt is stored once");
    assert.equal(await frame.locator("article.msg.interrupted").count(), 0);
    assert.equal(await frame.locator("article.msg.failed").count(), 0);
    assert.ok(!(await noticeTexts(frame)).some((t) => /connection to the model closed/.test(t)), "the notice cleared once the retry answered");
    assert.match(await lastAssistantText(frame), /The file says: Hello from the e2e workspace file\./);
    await shot("23-stream-cut-retried", { editorOnly: true });
  });

  await step("a proxy's 502 is told in words (no HTML) with Retry; the notice clears when the retry answers", async () => {
    await frame.fill("#prompt", "Hello again [502]");
    await frame.press("#prompt", "Enter");
    await noticeShown(frame, /answered 502 Bad Gateway: a proxy or gateway between you and the model could not reach it/);
    assert.ok(!/<html|nginx/i.test(await frame.locator("#notices").innerText()));
    await shot("24-bad-gateway", { editorOnly: true });
    await clickNoticeAction(frame, "Retry");
    await waitTurn(frame, "Hello again [502]");
    assert.deepEqual(await userTexts(frame), [cutPrompt, "Hello again [502]"]);
    assert.ok(!(await noticeTexts(frame)).some((t) => /502/.test(t)));
  });

  await step("Fork from a tool-call row copies the call's result: nothing shows as running", async () => {
    const carrier = frame.locator("article.role-assistant", { has: frame.locator("details.tool-call") }).first();
    await carrier.hover();
    await carrier.locator("button.action", { hasText: "Fork" }).click();
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 2 && !document.body.innerText.includes("Hello again"));
    const call = frame.locator("details.tool-call").first();
    assert.match(await call.locator("summary").innerText(), /read_file ✓/);
    assert.ok(!/running…/.test(await frame.locator("#messages").innerText()));
    await call.locator("summary").click();
    assert.match(await call.locator(".tool-result").innerText(), /Hello from the e2e workspace file\./);
    await shot("25-fork-from-call", { editorOnly: true });
  });

  const secretPrompt = "My token is hunter2-secret, help me rotate it";
  await step("Redact of the first prompt: the header, the editor tab and the list no longer show the secret", async () => {
    frame = await newChat();
    await send(frame, secretPrompt);
    await frame.waitForFunction(() => document.getElementById("title").textContent.includes("hunter2"));
    await listRow("hunter2-secret").waitFor({ state: "visible" });
    await messageAction(frame, "user", "hunter2-secret", "Redact");
    const box = page.locator('.quick-input-widget input[type="password"]');
    await box.waitFor({ state: "visible" });
    await box.fill("hunter2-secret");
    await page.keyboard.press("Enter");
    await frame.waitForFunction(() => document.querySelector("article.role-user .plain")?.textContent === "My token is [redacted], help me rotate it");
    await frame.waitForFunction(() => !document.getElementById("title").textContent.includes("hunter2"));
    await waitFor("the tab to lose the secret", async () => (await page.locator(".tabs-container .tab", { hasText: "hunter2" }).count()) === 0);
    await waitFor("the list to lose the secret", async () => (await page.locator("#workbench\\.parts\\.sidebar .monaco-list-row", { hasText: "hunter2" }).count()) === 0);
    await listRow("[redacted]").waitFor({ state: "visible" });
    assert.match(await frame.locator("#title").innerText(), /My token is \[redacted\]/);
    await shot("26-redacted-title");
  });

  await step("two windows on one conversation: the other's turn appears within 2 s; a stale Regenerate says it changed in another window and deletes nothing", async () => {
    const one = page;
    const frameOne = frame;
    const context2 = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const two = await context2.newPage();
    two.setDefaultTimeout(STEP_TIMEOUT);
    await two.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`);
    await two.waitForSelector(".monaco-workbench", { timeout: 90_000 });
    page = two;
    let frameTwo;
    try {
      await showChatList();
      frameTwo = await openFromFreshList("[redacted]");
      await frameTwo.waitForFunction(() => document.querySelectorAll("article.msg").length === 2);
      await waitFor("the second window's history server", async () => historyServers().length === 2, 60_000);
    } finally {
      page = one;
    }
    // Window one sends a turn; window two shows it without being touched.
    await send(frameOne, "A turn from window one");
    const sent = Date.now();
    await frameTwo.waitForFunction(() => document.body.innerText.includes("to: A turn from window one"), null, { timeout: 10_000 });
    const appeared = Date.now() - sent;
    log(`the other window's turn appeared after ${appeared} ms`);
    assert.ok(appeared <= 2000, `appeared after ${appeared} ms`);
    // Replies are stored while they stream, so window two may first show the reply streaming
    // (no actions on it); its Regenerate below needs the finished row.
    await frameTwo.waitForFunction(() => {
      const last = [...document.querySelectorAll("article.role-assistant")].at(-1);
      return last?.innerText.includes("to: A turn from window one") && !last.classList.contains("streaming");
    }, null, { timeout: 10_000 });
    page = two;
    await shot("27-second-window-sees-turn");
    page = one;

    // Window two's view goes stale: its server is paused while window one sends another turn,
    // and window two clicks Regenerate on the last reply it shows.
    const servers = historyServers();
    const started = (pid) => Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[19]);
    const second = servers.sort((a, b) => started(a) - started(b)).at(-1);
    process.kill(second, "SIGSTOP");
    let resumed = false;
    try {
      await send(frameOne, "Another turn from window one");
      const requests = fake.requests.length;
      await messageAction(frameTwo, "assistant", "A turn from window one", "Regenerate");
      await sleep(300);
      process.kill(second, "SIGCONT");
      resumed = true;
      await noticeShown(frameTwo, /This chat changed in another window, so nothing was changed here/);
      await frameTwo.waitForFunction(() => document.body.innerText.includes("Another turn from window one"));
      assert.equal(fake.requests.length, requests, "no turn was run again");
      assert.deepEqual(await userTexts(frameTwo), ["My token is [redacted], help me rotate it", "A turn from window one", "Another turn from window one"]);
      assert.deepEqual(await userTexts(frameOne), ["My token is [redacted], help me rotate it", "A turn from window one", "Another turn from window one"]);
      assert.match(await frameTwo.locator("article.role-assistant").last().locator(".body").innerText(), /Reply #\d+ to: Another turn from window one/);
    } finally {
      if (!resumed) process.kill(second, "SIGCONT");
    }
    page = two;
    await shot("28-stale-regenerate-refused");
    page = one;
    await shot("29-first-window-kept-its-turn");
    await context2.close();
  });

  await step("a 20,000-character prompt shows collapsed with Show more; Stop ends the running reply interrupted, its text saved", async () => {
    frame = await newChat();
    const long = `[slow] ${"x".repeat(20_000)}`;
    await frame.fill("#prompt", long);
    await frame.press("#prompt", "Enter");
    const user = frame.locator("article.role-user").last();
    await user.locator("button.show-more").waitFor();
    assert.ok((await user.locator(".plain").innerText()).length < 1_500, "collapsed");
    await frame.locator("#stop").waitFor({ state: "visible" });
    await frame.waitForFunction(() => (document.querySelector("article.msg.streaming .body")?.textContent ?? "").includes("word word"));
    await shot("31-long-prompt-streaming", { editorOnly: true });
    await frame.locator("#stop").click();
    await noticeShown(frame, /You stopped the reply\. The text shown is saved/);
    await frame.waitForFunction(() => !document.body.classList.contains("busy"));
    assert.equal(await frame.locator("#stop").isVisible(), false);
    assert.equal(await frame.locator("article.msg.interrupted").count(), 1);
    // The prompt and the reply as far as it got are stored.
    await waitFor("the list to show the stopped chat", async () => /2 messages ·/.test(await listRow("[slow]").innerText().catch(() => "")));
    await user.locator("button.show-more").click();
    assert.equal((await frame.locator("article.role-user").last().locator(".plain").innerText()).length, long.length, "expanded");
    await shot("32-stopped", { editorOnly: true });
  });

  // --- Issue 35, items 17-20: the panel as a person uses it ---------------------------------------
  // Each step starts its own chat, so `E2E_ONLY=person` runs them alone (about a minute).
  /** The prompt box's text once the webview has drawn (what a person typed into it). */
  const promptValue = (f) => f.evaluate(() => document.getElementById("prompt").value);

  await step("person: New Chat from the list's + puts the cursor in the prompt box, every time (every key typed right after the click; and into a panel made anew)", async () => {
    await showChatList();
    frame = await newChat();
    await send(frame, "A chat to leave with the + button");
    for (let i = 1; i <= 10; i++) {
      // The chat again from the list (VS Code moves the focus into the panel), then a click on its
      // text: the focus is in the panel, outside the prompt box, as a person reading it leaves it.
      await listRow("A chat to leave with the + button").click();
      await frame
        .waitForFunction(() => document.querySelectorAll("article.msg").length >= 2 && document.hasFocus(), null, { timeout: 10_000 })
        .catch(async (error) => {
          const seen = await frame.evaluate(() => ({ rows: document.querySelectorAll("article.msg").length, focus: document.hasFocus() }));
          throw new Error(`click ${i} on the list row: ${seen.rows} rows shown, focus in the panel: ${seen.focus} (${error.message})`);
        });
      await frame.locator("article.role-assistant").last().click();
      await sleep(300); // a moment's reading
      // Every key that reaches the panel's page from now on is recorded, wherever it lands.
      await frame.evaluate(() => {
        window.__keys = [];
        if (!window.__recording) document.addEventListener("keydown", (e) => e.key.length === 1 && window.__keys.push(e.key), true);
        window.__recording = true;
      });
      const typed = `typed at once ${i}`;
      await sidebarAction("New Chat").click();
      // Typing at once, at a quick person's pace: every key lands in the prompt box. (Before, VS
      // Code's focus of the shown panel, in two moves 50 ms apart, lost the keys typed between
      // them: 6 of 10 clicks kept every key. With the focus in the list itself, keys typed before
      // the command has run, ~50 ms, still reach the list: no extension sees them.)
      await page.keyboard.type(typed, { delay: 20 });
      await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 0, null, { timeout: 10_000 });
      const reached = await frame.evaluate(() => window.__keys.join(""));
      log(`+ (${i}): ${reached.length} of ${typed.length} keys reached the panel`);
      assert.equal(reached, typed, "every key reached the panel");
      await waitFor(`every key typed after + (${i}) in the prompt box`, async () => (await promptValue(frame)) === typed, 5_000);
      if (i === 1) await shot("43-new-chat-typed", { editorOnly: true });
      await frame.fill("#prompt", "");
    }
    // With the focus in the side bar (Ctrl+0), at a person's pace: a key typed 250 ms after the
    // click (a hand goes from mouse to keys in ~400 ms) lands too. Measured: from 60 ms on, every
    // key lands; typed at once, the first key reaches the side bar before the command runs.
    for (let i = 1; i <= 3; i++) {
      await page.keyboard.press("Control+0");
      await sleep(300);
      const typed = `from the side bar ${i}`;
      await sidebarAction("New Chat").click();
      await sleep(250);
      await page.keyboard.type(typed, { delay: 20 });
      await waitFor(`every key typed 250 ms after + from the side bar (${i})`, async () => (await promptValue(frame)) === typed, 5_000);
      await frame.fill("#prompt", "");
    }
    // Once more with the chat's tab closed: the panel is made anew, and the cursor is still there.
    await runCommand("View: Close All Editors");
    await sidebarAction("New Chat").click();
    frame = await chatFrame();
    await frame.waitForFunction(() => document.activeElement?.id === "prompt" && document.hasFocus(), null, { timeout: 10_000 });
    await page.keyboard.type("typed into a new panel");
    await waitFor("the text typed into a new panel", async () => (await promptValue(frame)) === "typed into a new panel", 5_000);
    await frame.fill("#prompt", "");
  });

  await step("person: Edit (unchanged) of a prompt whose reply failed with a 500 sends it to the model and stores prompt and reply", async () => {
    frame = await newChat();
    const prompt = "Why did the build break? [500]";
    await frame.fill("#prompt", prompt);
    await frame.press("#prompt", "Enter");
    await noticeShown(frame, /answered 500/);
    await frame.waitForFunction(() => !document.body.classList.contains("busy"));
    const before = fake.requests.length;
    await messageAction(frame, "user", prompt, "Edit");
    await answerInputBox(prompt);
    await waitTurn(frame, prompt);
    const sent = fake.requests.slice(before).map((r) => r.body.messages);
    assert.equal(sent.length, 1, "one request");
    assert.ok(sent[0].some((m) => m.role === "user" && JSON.stringify(m.content).includes("Why did the build break?")), `the prompt is sent: ${JSON.stringify(sent[0])}`);
    assert.match(await lastAssistantText(frame), /Reply #\d+ to: Why did the build break\? \[500\]/);
    assert.ok(!(await noticeTexts(frame)).some((t) => /answered 500/.test(t)), "the failure notice went with the answer");
    await shot("44-edit-after-500", { editorOnly: true });
    // As stored: open it again from the list.
    await showChatList();
    await listRow("Why did the build break?").click();
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 2);
    assert.deepEqual(await userTexts(frame), [prompt]);
    assert.match(await lastAssistantText(frame), /to: Why did the build break\?/);
  });

  await step("person: Edit-resend of the prompt of an interrupted reply stores the prompt, then its reply", async () => {
    frame = await newChat();
    await send(frame, "Where is the config read?");
    const prompt = "And where is it written? [cut-text]";
    await frame.fill("#prompt", prompt);
    await frame.press("#prompt", "Enter");
    await noticeShown(frame, /reply ended without saying it was complete/);
    await frame.waitForFunction(() => !document.body.classList.contains("busy") && document.querySelectorAll("article.msg.interrupted").length === 1);
    await messageAction(frame, "user", prompt, "Edit");
    await answerInputBox(prompt);
    // The interrupted bubble goes as the new turn starts (until then the old view looks finished).
    await frame.waitForFunction(() => document.querySelectorAll("article.msg.interrupted").length === 0);
    await waitTurn(frame, prompt);
    assert.match(await lastAssistantText(frame), /to: And where is it written\?/);
    await shot("45-edit-after-interrupted", { editorOnly: true });
    await showChatList();
    await listRow("Where is the config read?").click();
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 4);
    assert.deepEqual(await userTexts(frame), ["Where is the config read?", prompt]);
    const roles = await frame.locator("article.msg").evaluateAll((rows) => rows.map((r) => r.className.match(/role-(\w+)/)[1]));
    assert.deepEqual(roles, ["user", "assistant", "user", "assistant"]);
    assert.match(await lastAssistantText(frame), /to: And where is it written\?/);
  });

  /**
   * The chat webview `f` falls one redraw behind: the views its extension posts are held on their
   * way in (VS Code's webview host hands each to the page's own postMessage), not received, while
   * its state follows the other window, as on a busy machine. {@link releaseViews} draws the last.
   */
  const holdViews = (f) =>
    f.evaluate(() => {
      window.__held = [];
      window.__hold = true;
      if (window.__post) return;
      const post = window.postMessage.bind(window);
      window.__post = post;
      window.postMessage = (message, ...rest) => {
        if (window.__hold && message?.type === "view") window.__held.push(message.view);
        else post(message, ...rest);
      };
    });
  const releaseViews = (f) =>
    f.evaluate(() => {
      window.__hold = false;
      window.__post({ type: "view", view: window.__held.at(-1) }, "*");
    });
  /** Clicks (`click`) on the held screen, waits until the extension answered it, then draws the last view. */
  async function releaseViewsAfter(f, click) {
    const held = await f.evaluate(() => window.__held.length);
    await click();
    await f.waitForFunction((n) => window.__held.length > n, held, { timeout: 15_000 });
    await sleep(500);
    await releaseViews(f);
  }
  /** A second window on this code-server, showing the conversation whose list row holds `text`. */
  async function secondWindow(text, waitText) {
    const context2 = await browser.newContext({ viewport: { width: 1400, height: 1800 } });
    const two = await context2.newPage();
    two.setDefaultTimeout(STEP_TIMEOUT);
    await two.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`);
    await two.waitForSelector(".monaco-workbench", { timeout: 90_000 });
    const one = page;
    page = two;
    try {
      await showChatList();
      const frameTwo = await openFromFreshList(text);
      await frameTwo.waitForFunction((t) => document.body.innerText.includes(t), waitText);
      return { context2, two, frameTwo };
    } finally {
      page = one;
    }
  }

  await step("person: a Regenerate clicked on a screen one redraw behind deletes nothing; the panel says the chat changed and shows it", async () => {
    const one = page;
    const frameOne = await newChat();
    frame = frameOne;
    await send(frameOne, "A base turn for two windows");
    await showChatList();
    await listRow("A base turn for two windows").waitFor({ state: "visible" });
    const context2 = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const two = await context2.newPage();
    two.setDefaultTimeout(STEP_TIMEOUT);
    await two.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`);
    await two.waitForSelector(".monaco-workbench", { timeout: 90_000 });
    page = two;
    let frameTwo;
    try {
      await showChatList();
      frameTwo = await openFromFreshList("A base turn for two windows");
      await frameTwo.waitForFunction(() => document.body.innerText.includes("to: A base turn for two windows"));
      await holdViews(frameTwo);
      page = one;
      await send(frameOne, "The newest turn from window one");
      // Window two's state has the new turn (a view holding it was posted), its screen does not.
      await frameTwo.waitForFunction(() => window.__held.some((v) => v.messages.some((m) => m.content.includes("to: The newest turn from window one"))), null, { timeout: 10_000 });
      assert.ok(!(await frameTwo.locator("#messages").innerText()).includes("The newest turn"), "window two's screen is behind");
      const requests = fake.requests.length;
      const held = await frameTwo.evaluate(() => window.__held.length);
      await messageAction(frameTwo, "assistant", "to: A base turn for two windows", "Regenerate");
      // The extension answered the click (a view after it), then the screen catches up.
      await frameTwo.waitForFunction((n) => window.__held.length > n && !window.__held.at(-1).busy, held, { timeout: 10_000 });
      await sleep(500);
      await releaseViews(frameTwo);
      await noticeShown(frameTwo, /This chat changed in another window, so nothing was changed here/);
      await frameTwo.waitForFunction(() => document.body.innerText.includes("to: The newest turn from window one"));
      assert.equal(fake.requests.length, requests, "no turn was run again");
      assert.deepEqual(await userTexts(frameTwo), ["A base turn for two windows", "The newest turn from window one"]);
      page = two;
      await shot("46-stale-screen-refused", { editorOnly: true });
      page = one;
      // Window one keeps its turn, also as stored.
      await showChatList();
      await listRow("A base turn for two windows").click();
      await frameOne.waitForFunction(() => document.querySelectorAll("article.msg").length === 4);
      assert.deepEqual(await userTexts(frameOne), ["A base turn for two windows", "The newest turn from window one"]);
      await shot("47-first-window-kept-newest-turn", { editorOnly: true });
    } finally {
      page = one;
      await context2.close();
    }
  });

  // --- Issue 43, items 14-17: the panel as a person uses it (`E2E_ONLY=hardening`) ------------------
  await step("hardening: a Regenerate clicked on a busy page as the other window's newest turn is drawn, before the screen shows it, deletes nothing; the panel says the chat changed", async () => {
    const one = page;
    const frameOne = await newChat();
    frame = frameOne;
    await send(frameOne, "First of two turns before the press");
    await send(frameOne, "Second of two turns before the press");
    await showChatList();
    await listRow("First of two turns before the press").waitFor({ state: "visible" });
    const { context2, two, frameTwo } = await secondWindow("First of two turns before the press", "to: Second of two turns before the press");
    const prompts = ["First of two turns before the press", "Second of two turns before the press"];
    try {
      // The click must be handled after the new turn is drawn and before a frame shows it. The
      // press is sent 100 ms after the page starts drawing and working; on a loaded machine the
      // page may start later, and a press before the redraw is no such click: then once more.
      for (let attempt = 1; ; attempt++) {
        for (const close of await frameTwo.locator(".notice button.dismiss").all()) await close.click();
        await holdViews(frameTwo);
        const newest = `A newer turn from window one, take ${attempt}`;
        prompts.push(newest);
        await send(frameOne, newest);
        await frameTwo.waitForFunction((t) => window.__held.some((v) => v.messages.some((m) => m.content.includes(t))), `to: ${newest}`, { timeout: 10_000 });
        assert.ok(!(await frameTwo.locator("#messages").innerText()).includes(newest), "window two's screen is behind");
        const requests = fake.requests.length;
        // The person clicks Regenerate on the newest reply they see, as the other window's turn
        // comes in on a busy page: it is drawn (below, nothing above it moves) and the page is
        // busy for a moment (a long reply being laid out, a collection), so no frame shows it
        // yet. The screen still shows the older rows when the click is handled.
        const reply = frameTwo.locator("article.role-assistant").last();
        await reply.hover();
        const box = await reply.locator("button.action", { hasText: "Regenerate" }).boundingBox();
        await two.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
        await frameTwo.evaluate((t) => {
          window.__click = null;
          const seen = (e) => e.target.closest?.("button[data-action]") && (window.__click = { drawn: document.body.innerText.includes(t) });
          document.addEventListener("click", seen, { capture: true, once: true });
        }, `to: ${newest}`);
        const busy = frameTwo.evaluate(() => {
          window.__hold = false;
          window.dispatchEvent(new MessageEvent("message", { data: { type: "view", view: window.__held.at(-1) } }));
          for (const until = performance.now() + 600; performance.now() < until; );
        });
        await sleep(100);
        await two.mouse.down();
        await two.mouse.up();
        await busy;
        await sleep(300);
        const click = await frameTwo.evaluate(() => window.__click);
        if (!click?.drawn) {
          log(`attempt ${attempt}: the click was ${click ? "handled before the redraw" : "lost (pressed before the redraw)"}; once more`);
          assert.ok(attempt < 4, "the click came with the redraw in one of four attempts");
          await frameTwo.waitForFunction((t) => document.body.innerText.includes(t), `to: ${newest}`);
          continue;
        }
        // Either the refusal in words, or (the defect) a regenerate run on the newer rows.
        await waitFor("the panel to answer the Regenerate", async () =>
          fake.requests.length > requests ||
          (await noticeTexts(frameTwo)).some((t) => /This chat changed in another window, so nothing was changed here/.test(t)),
        );
        await sleep(500);
        assert.equal(fake.requests.length, requests, "no turn was run again");
        break;
      }
      assert.deepEqual(await userTexts(frameTwo), prompts);
      page = two;
      await shot("48-pressed-as-redrawn-refused", { editorOnly: true });
      page = one;
      // Window one keeps its newest turn, also as stored.
      await showChatList();
      await listRow("First of two turns before the press").click();
      await frameOne.waitForFunction((n) => document.querySelectorAll("article.msg").length === n, prompts.length * 2);
      assert.deepEqual(await userTexts(frameOne), prompts);
      assert.match(await lastAssistantText(frameOne), new RegExp(`to: ${prompts.at(-1)}`));
    } finally {
      page = one;
      await context2.close();
    }
  });

  // --- Issue 34, item 6: replies stored while they stream (protocol version 4) ----------------
  // `E2E_ONLY='workbench loads|replies'` runs only these (about two minutes).
  const streamingText = (f) => f.evaluate(() => document.querySelector("article.msg.streaming .body")?.textContent ?? "");
  /** Sends a [slow] prompt and returns the reply's text as shown once several words arrived, after two flushes' time. */
  async function startSlowReply(f, prompt, words = 8) {
    await f.fill("#prompt", prompt);
    await f.press("#prompt", "Enter");
    await f.waitForFunction((n) => (document.querySelector("article.msg.streaming .body")?.textContent ?? "").split("word").length > n, words);
    const shown = await streamingText(f);
    // The panel stores what arrived at most 4 times a second: what was shown is committed now.
    await sleep(700);
    return shown;
  }
  const lastReply = (f) => f.locator("article.role-assistant").last();
  /** A reply's text as the page holds it (its paragraphs' text, without the line breaks between them). */
  const replyText = (f) => lastReply(f).locator(".body").evaluate((e) => e.textContent);
  const noSpace = (t) => t.replace(/\s+/g, "");
  async function openFromList(text) {
    await showChatList();
    // (after a reload the list refreshes as its server starts: a click can hit a stale item)
    frame = await openFromFreshList(text);
    await frame.waitForFunction((t) => document.body.innerText.includes(t), text);
  }
  /** The cut reply as the panel shows it once it is interrupted, and its offer. */
  async function cutShown(f, shown, timeout = STEP_TIMEOUT) {
    await f.locator("article.role-assistant.interrupted").last().waitFor({ state: "visible", timeout });
    const text = await replyText(f);
    assert.ok(text.startsWith(shown.trim()), `the text shown before is there: ${JSON.stringify(shown.slice(-40))} in ${JSON.stringify(text.slice(-60))}`);
    assert.match(await lastReply(f).innerText(), /Interrupted: saved as far as it got/);
    const buttons = await f.locator(".notice button.notice-action").allInnerTexts();
    assert.deepEqual(buttons, ["Continue", "Retry", "Keep"]);
    return text;
  }
  /** Continue on the cut reply: streamed into the same bubble; the body the model got ends with the partial reply. */
  async function continueCut(f, partial, path) {
    const key = await lastReply(f).getAttribute("data-key");
    const replies = await f.locator("article.role-assistant").count();
    const before = fake.requests.length;
    await clickNoticeAction(f, "Continue");
    await f.waitForFunction(() => {
      const last = [...document.querySelectorAll("article.role-assistant")].at(-1);
      return !document.body.classList.contains("busy") && last && !last.classList.contains("streaming") && !last.classList.contains("interrupted") && last.textContent.includes("and that is the rest of the reply.");
    });
    assert.equal(await lastReply(f).getAttribute("data-key"), key, "the same bubble (the same row)");
    assert.equal(await f.locator("article.role-assistant").count(), replies, "no second reply");
    const sent = fake.requests.slice(before);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].path, path);
    const messages = sent[0].body.messages;
    const last = messages.at(-1);
    const lastText = typeof last.content === "string" ? last.content : last.content.map((b) => b.text ?? "").join("");
    assert.equal(last.role, "assistant", `the body ends with the partial reply: ${JSON.stringify(messages.map((m) => m.role))}`);
    assert.equal(noSpace(lastText), noSpace(partial), "the partial reply as stored");
    if (path === "/v1/messages") assert.doesNotMatch(lastText, /\s$/, "a prefill without trailing whitespace");
    assert.equal(messages.filter((m) => m.role === "user").length, 1, "no user message the user did not write");
    return replyText(f);
  }

  const openaiSettings = JSON.parse(readFileSync(settingsFile, "utf8"));
  /**
   * An Anthropic-format model, with the turn limit back at its default: the limit of 1 set in the
   * Settings UI step sends only the newest turn, and the signed-thinking steps need the turn before.
   */
  const { "chatHistory.context.maxHistoryTurns": _limit, ...unlimited } = openaiSettings;
  const anthropicSettings = { ...unlimited, "chatPanel.provider": "anthropic", "chatPanel.baseUrl": fake.url, "chatPanel.model": "claude-sonnet-4-5" };
  await step("replies: a reload mid-stream: the text shown before it is there after it, marked interrupted, with Continue, Retry and Keep", async () => {
    frame = await newChat();
    const shown = await startSlowReply(frame, "Tell me about rivers [slow]");
    await shot("50-reply-streaming-before-reload", { editorOnly: true });
    await page.reload();
    await page.waitForSelector(".monaco-workbench", { timeout: 90_000 });
    await openFromList("Tell me about rivers");
    const text = await cutShown(frame, shown);
    assert.ok((text.match(/word/g) ?? []).length < 200, "the reply was cut before its end");
    await shot("51-reload-interrupted", { editorOnly: true });
  });

  await step("replies: Continue (OpenAI format) streams into the same bubble and row; the model got the partial reply last, no invented prompt", async () => {
    const partial = await replyText(frame);
    const text = await continueCut(frame, partial, "/v1/chat/completions");
    assert.ok(text.startsWith(partial.trim()));
    await shot("52-continued-openai", { editorOnly: true });
    // As stored: opened again, one prompt and one complete reply.
    await openFromList("Tell me about rivers");
    assert.equal(await frame.locator("article.msg").count(), 2);
    assert.equal(await frame.locator("article.msg.interrupted").count(), 0);
    assert.match(await lastAssistantText(frame), /and that is the rest of the reply\.$/);
  });

  await step("replies: a second window of the conversation shows the reply as it grows", async () => {
    const one = page;
    const frameOne = await newChat();
    frame = frameOne;
    await send(frameOne, "A chat watched from two windows");
    const context2 = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const two = await context2.newPage();
    two.setDefaultTimeout(STEP_TIMEOUT);
    try {
      await two.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`);
      await two.waitForSelector(".monaco-workbench", { timeout: 90_000 });
      page = two;
      await showChatList();
      const frameTwo = await openFromFreshList("A chat watched from two windows");
      await frameTwo.waitForFunction(() => document.body.innerText.includes("to: A chat watched from two windows"));
      await frameTwo.evaluate(() => {
        window.__partials = [];
        new MutationObserver(() => {
          const streaming = document.querySelector("article.msg.streaming .body");
          if (streaming) window.__partials.push(streaming.textContent);
        }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
      });
      page = one;
      await frameOne.fill("#prompt", "And now slowly [slow]");
      await frameOne.press("#prompt", "Enter");
      await frameTwo.waitForFunction(() => window.__partials.length >= 3 && window.__partials.at(-1).includes("word word"), null, { timeout: 20_000 });
      page = two;
      await shot("55-second-window-reply-growing", { editorOnly: true });
      page = one;
      await shot("56-first-window-streaming", { editorOnly: true });
      await waitTurn(frameOne, "And now slowly [slow]");
      const final = await lastAssistantText(frameOne);
      await frameTwo.waitForFunction(
        (text) => {
          const last = [...document.querySelectorAll("article.role-assistant")].at(-1);
          return last && !last.classList.contains("streaming") && last.querySelector(".body").innerText === text;
        },
        final,
        { timeout: 10_000 },
      );
      const partials = [...new Set(await frameTwo.evaluate(() => window.__partials))].filter((p) => p !== "");
      log(`the second window showed ${partials.length} partial texts`);
      assert.ok(partials.length >= 3, `several partial texts: ${partials.length}`);
      for (let i = 1; i < partials.length; i++) assert.ok(partials[i].startsWith(partials[i - 1]), `each a prefix of the next (${i})`);
    } finally {
      page = one;
      await context2.close();
    }
  });

  await step("replies: code-server killed with SIGKILL mid-stream and started again: the text shown is there, interrupted, within 30 s", async () => {
    frame = await newChat();
    const shown = await startSlowReply(frame, "Tell me about glaciers [slow]");
    await shot("57-reply-streaming-before-kill", { editorOnly: true });
    // A crash: code-server, its extension host and the history server, with no time to clean up.
    const servers = historyServers();
    process.kill(-codeServer.pid, "SIGKILL");
    for (const pid of servers) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // went with code-server's group
      }
    }
    const killed = Date.now();
    codeServer = null;
    await closeBrowser();
    await waitFor("the history server to be gone", () => historyServers().length === 0);
    // While it is down, its settings name an Anthropic-format model for the next step (a running
    // code-server here does not notice settings.json written behind its back).
    // (A Claude model that takes a prefill: the server sends any other Anthropic model the note.)
    writeFileSync(settingsFile, JSON.stringify(anthropicSettings, null, 2));
    await startCodeServer();
    await openWorkbench();
    await openFromList("Tell me about glaciers");
    await cutShown(frame, shown, 45_000);
    const took = Date.now() - killed;
    log(`the killed reply showed interrupted ${took} ms after the kill`);
    assert.ok(took <= 30_000, `interrupted within 30 s of the kill: ${took} ms`);
    await shot("58-killed-interrupted", { editorOnly: true });
  });

  await step("replies: Stop ends the reply interrupted with its text (Continue, Retry, Keep stay); Continue with an Anthropic-format model prefills it", async () => {
    try {
      frame = await newChat();
      const shown = await startSlowReply(frame, "Tell me about lakes [slow]");
      await frame.locator("#stop").click();
      await noticeShown(frame, /You stopped the reply\. The text shown is saved/);
      const partial = await cutShown(frame, shown);
      assert.equal(fake.requests.at(-1).path, "/v1/messages", "the Anthropic format");
      await shot("53-stopped-saved", { editorOnly: true });
      const text = await continueCut(frame, partial, "/v1/messages");
      assert.equal(text, `${partial.trimEnd()} and that is the rest of the reply.`, "one space where the prefill cut one");
      await shot("54-continued-anthropic", { editorOnly: true });
    } finally {
      // Back to the OpenAI format for the next start of code-server.
      writeFileSync(settingsFile, JSON.stringify(openaiSettings, null, 2));
    }
  });

  await step("replies: a provider's refusal of signed thinking (Anthropic format) is reported and retried once, with a note; the retried reply is shown and stored", async () => {
    if (ONLY) {
      // Run alone: this window's model is an Anthropic-format one, as after the step before.
      writeFileSync(settingsFile, JSON.stringify(anthropicSettings, null, 2));
      await freshCodeServer();
      writeFileSync(settingsFile, JSON.stringify(openaiSettings, null, 2));
    }
    frame = await newChat();
    await send(frame, "Think first [think]");
    assert.equal(fake.requests.at(-1).path, "/v1/messages", "the Anthropic format");
    assert.match(await lastAssistantText(frame), /Reply #\d+ to: Think first \[think\]/);
    const before = fake.requests.length;
    const refusals = fake.refusals;
    await send(frame, "And now? [refuse-signature]");
    assert.equal(fake.refusals, refusals + 1, "the model refused once");
    assert.equal(fake.requests.length, before + 2, "one refused request, one retry");
    const [refused, retried] = fake.requests.slice(before).map((r) => JSON.stringify(r.body.messages));
    assert.match(refused, /"type":"thinking"/, "the refused request sent the signed thinking back");
    assert.doesNotMatch(retried, /"type":"thinking"/, "the retry sent it no more");
    assert.match(await lastAssistantText(frame), /Reply #\d+ to: And now\? \[refuse-signature\]/);
    const notices = await noticeTexts(frame);
    assert.ok(notices.some((t) => /Invalid `signature` in `thinking` block/.test(t) && /retrying once without it/.test(t)), notices.join(" | "));
    assert.equal(await frame.locator("article.role-user").count(), 2, "the prompt is stored once");
    await shot("84-provider-refusal-retried", { editorOnly: true });
  });

  /**
   * The conversation whose list row holds `text`, read again from the store: another chat first,
   * then the list's row (once the list has settled: a row clicked while the list refreshes after
   * a turn is a stale item, and VS Code says its command was not found).
   */
  async function reopenFromList(text) {
    await runCommand("Chat Panel: New Chat");
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 0);
    await sleep(1000);
    await openFromList(text);
  }

  /** code-server started afresh: one window, one history server. */
  async function freshCodeServer() {
    await closeBrowser();
    await stopCodeServer();
    await waitFor("the history servers to exit with code-server", () => historyServers().length === 0);
    await startCodeServer();
    await openWorkbench();
  }

  await step("hardening: the history server killed mid-reply: the panel says it stopped and was restarted and shows at once the reply as stored, interrupted; Retry answers the prompt once", async () => {
    await freshCodeServer();
    frame = await newChat();
    const prompt = "Tell me about river deltas [slow]";
    const shown = await startSlowReply(frame, prompt);
    assert.equal(historyServers().length, 1, "one history server");
    const [victim] = historyServers();
    process.kill(victim, "SIGKILL");
    const killed = Date.now();
    // At once, not after the lease of the dead server (20 s): the reply as stored, interrupted,
    // with one offer, and words that say what happened.
    await waitFor("the panel to settle the cut reply", async () => (await frame.locator("article.role-assistant.interrupted").count()) > 0 && (await frame.locator(".notice button.notice-action").count()) > 0, 45_000);
    const took = Date.now() - killed;
    log(`the reply showed settled ${took} ms after the history server was killed`);
    const notices = await noticeTexts(frame);
    log(`notices: ${JSON.stringify(notices)}`);
    assert.ok(notices.some((t) => /history server stopped/i.test(t) && /restarted/.test(t)), `says the history server stopped and was restarted: ${JSON.stringify(notices)}`);
    assert.ok(!notices.some((t) => /connection to the model closed|Nothing of this reply was stored/.test(t)), "no false words about the model or the store");
    assert.equal(await frame.locator(".notice").count(), 1, "one notice");
    assert.deepEqual(await frame.locator(".notice button.notice-action").allInnerTexts(), ["Continue", "Retry", "Keep"]);
    assert.equal(await frame.locator("article.msg.failed").count(), 0, "the prompt is not marked 'No reply stored'");
    assert.ok(took <= 10_000, `settled within 10 s of the kill: ${took} ms`);
    // Only what is stored: the text no longer grows, and a fresh read shows the same.
    const settled = await replyText(frame);
    assert.ok(noSpace(settled).startsWith(noSpace(shown)), "the text shown before the kill is stored");
    await sleep(1000);
    assert.equal(await replyText(frame), settled, "the bubble no longer grows");
    await shot("70-server-killed-settled", { editorOnly: true });
    await waitFor("one new history server", () => historyServers().length === 1 && historyServers()[0] !== victim);
    await reopenFromList("Tell me about river deltas");
    await frame.locator("article.role-assistant.interrupted").waitFor({ state: "visible" });
    assert.equal(await replyText(frame), settled, "the panel showed what is stored");
    // Retry: the cut reply goes and the prompt is answered once, at once (no 1004, no second reply).
    const before = fake.requests.length;
    await clickNoticeAction(frame, "Retry");
    await frame.waitForFunction(() => {
      const last = [...document.querySelectorAll("article.role-assistant")].at(-1);
      return !document.body.classList.contains("busy") && last && !/\b(interrupted|streaming)\b/.test(last.className);
    });
    assert.equal(fake.requests.length - before, 1, "one model request");
    assert.deepEqual(await noticeTexts(frame), [], "no notice left");
    await reopenFromList("Tell me about river deltas");
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length >= 2);
    const roles = await frame.locator("article.msg").evaluateAll((rows) => rows.map((r) => `${r.className.match(/role-(\w+)/)[1]}${r.classList.contains("interrupted") ? " interrupted" : ""}`));
    assert.deepEqual(roles, ["user", "assistant"], "one prompt and one complete reply, as stored");
    await shot("71-server-killed-retried", { editorOnly: true });
  });

  await step("hardening: a reload right after a word is shown keeps that word (four reloads mid-reply)", async () => {
    for (let i = 1; i <= 4; i++) {
      frame = await newChat();
      const prompt = `Reload right after a word, take ${i} [slow]`;
      await frame.fill("#prompt", prompt);
      await frame.press("#prompt", "Enter");
      await frame.waitForFunction(() => (document.querySelector("article.msg.streaming .body")?.textContent ?? "").split("word").length > 6);
      // The moment a new word is drawn, the window reloads: that word is the last the person saw.
      const shown = await frame.evaluate(
        () =>
          new Promise((resolve) => {
            const text = () => document.querySelector("article.msg.streaming .body")?.textContent ?? "";
            const before = text();
            new MutationObserver((_, observer) => {
              if (text() !== before) {
                observer.disconnect();
                resolve(text());
              }
            }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
          }),
      );
      await page.reload();
      await page.waitForSelector(".monaco-workbench", { timeout: 90_000 });
      await openFromList(`Reload right after a word, take ${i}`);
      await frame.locator("article.role-assistant.interrupted").last().waitFor({ state: "visible" });
      const text = await replyText(frame);
      log(`reload ${i}: shown ${(shown.match(/word/g) ?? []).length} words, stored ${(text.match(/word/g) ?? []).length}`);
      assert.ok(noSpace(text).startsWith(noSpace(shown)), `reload ${i}: the last word shown is stored: ${JSON.stringify(shown.slice(-30))} / ${JSON.stringify(text.slice(-30))}`);
      if (i === 1) await shot("74-reload-kept-last-word", { editorOnly: true });
    }
  });

  await step("hardening: a window whose history server cannot start says so in the list with Retry (never 'No conversations'); the interpreter set in the Settings UI starts it and lists the conversations", async () => {
    frame = await newChat();
    await send(frame, "A chat kept while its server cannot start");
    const withPython = readFileSync(settingsFile, "utf8");
    const { "chatPanel.pythonPath": _python, ...without } = JSON.parse(withPython);
    await closeBrowser();
    await stopCodeServer();
    await waitFor("the history servers to exit with code-server", () => historyServers().length === 0);
    writeFileSync(settingsFile, JSON.stringify(without, null, 2));
    try {
      await startCodeServer();
      await openWorkbench();
      await showChatList();
      const sidebar = page.locator("#workbench\\.parts\\.sidebar");
      const welcome = sidebar.locator(".welcome-view-content").first();
      await welcome.waitFor({ state: "visible" });
      await waitFor("the list to say why it is empty", async () => /could not start/.test(await sidebar.innerText()), 30_000).catch(async (error) => {
        log(`the list says: ${JSON.stringify(await sidebar.innerText())}`);
        await shot("72-server-could-not-start");
        throw error;
      });
      assert.doesNotMatch(await sidebar.innerText(), /No conversations in this workspace yet/);
      assert.equal(historyServers().length, 0);
      await shot("72-server-could-not-start");
      // Retry, with nothing changed: it still cannot start, and the list still says so.
      await welcome.locator("a, .monaco-button", { hasText: "Retry" }).first().click();
      await sleep(1500);
      assert.match(await sidebar.innerText(), /could not start/);
      // The person sets the interpreter in the Settings UI the list's button opens (a machine
      // setting: code-server's window is a remote one, so it is under "Remote"): the server starts
      // and the conversations are listed, nothing lost.
      await welcome.locator("a, .monaco-button", { hasText: "Open Settings" }).first().click();
      await page.locator(".settings-editor").getByText(/^Remote \[/).first().click();
      const input = await settingInput("chatPanel.pythonPath");
      await input.fill(PYTHON);
      await input.press("Tab");
      const machineSettings = join(dirs.userData, "Machine", "settings.json");
      await waitFor("the remote settings to name the interpreter", () => existsSync(machineSettings) && readFileSync(machineSettings, "utf8").includes(JSON.stringify(PYTHON)));
      await showChatList();
      await listRow("A chat kept while its server cannot start").waitFor({ state: "visible", timeout: 30_000 });
      assert.equal(historyServers().length, 1);
      await shot("73-server-started-with-the-setting");
      // The failed start's notification and the Settings editor go, as a person would close them.
      for (const close of await page.locator(".notification-toast .codicon-notifications-clear").all()) await close.click();
      await page.locator(".tabs-container .tab", { hasText: "Settings" }).locator(".codicon-close").first().click();
    } finally {
      writeFileSync(settingsFile, withPython);
    }
  });

  await step("the panel's own retention defaults (maxTokens 4,000,000) show in the Settings UI", async () => {
    await runCommand("Preferences: Open User Settings");
    await page.locator(".settings-editor .suggest-input-container").first().waitFor({ state: "visible" });
    await sleep(500);
    await page.keyboard.press("Control+A");
    await page.keyboard.type("chatHistory.maxTokens");
    const input = await settingInput("chatHistory.maxTokens");
    assert.match(await page.locator(".settings-editor .setting-item-contents").first().innerText(), /Token cap for a stored conversation/);
    assert.equal(await input.inputValue(), "4000000");
    await shot("30-panel-defaults");
  });

  // --- Version 5 (issue 41): conversation trees in a chat of their own, two windows on it ----------
  // `E2E_ONLY='workbench loads|trees'` runs only these (after the first start of code-server).
  const rowOf = (f, role, text) => f.locator(`article.role-${role}`, { hasText: text }).last();
  const variantIn = (f, role, text) => rowOf(f, role, text).locator(".branch-count").innerText();
  /** Waits until the panel is idle and the last `role` row shows variant `label` ("2/2"). */
  const variantShown = (f, role, label) =>
    f.waitForFunction(
      ([r, l]) => !document.body.classList.contains("busy") && [...document.querySelectorAll(`article.role-${r}`)].at(-1)?.querySelector(".branch-count")?.textContent === l,
      [role, label],
    );
  const arrow = (f, role, which) => f.locator(`article.role-${role}`).last().locator(`button[data-branch="${which}"]`);
  let firstRiver = "";
  let secondRiver = "";

  await step("trees: Regenerate keeps the first reply as a variant (‹ 2/2 ›, nothing deleted); ‹ shows the earlier reply; Alt+Right and Alt+Left on the focused reply switch too", async () => {
    frame = await newChat();
    await send(frame, "Tell me about rivers of Europe");
    firstRiver = await lastAssistantText(frame);
    const requests = fake.requests.length;
    await messageAction(frame, "assistant", "to: Tell me about rivers of Europe", "Regenerate");
    await variantShown(frame, "assistant", "2/2");
    secondRiver = await lastAssistantText(frame);
    assert.notEqual(secondRiver, firstRiver);
    assert.match(secondRiver, /Reply #\d+ to: Tell me about rivers of Europe/);
    assert.equal(fake.requests.length, requests + 1);
    assert.deepEqual(fake.requests.at(-1).body.messages.map((m) => m.role), ["user"], "the regenerated request holds the prompt, not the earlier reply");
    assert.deepEqual(await userTexts(frame), ["Tell me about rivers of Europe"], "the prompt is not stored twice");
    assert.equal(await frame.locator("article.role-assistant").count(), 1);
    assert.equal(await arrow(frame, "assistant", "next").isDisabled(), true, "the newest variant is the last");
    await shot("85-trees-regenerated-2-of-2", { editorOnly: true });

    await arrow(frame, "assistant", "prev").click();
    await variantShown(frame, "assistant", "1/2");
    assert.equal(await lastAssistantText(frame), firstRiver, "the earlier reply, as stored");
    await shot("86-trees-variant-1-of-2", { editorOnly: true });

    // The keyboard: the reply is focusable; Alt+Right / Alt+Left switch, and the focus stays on it.
    await rowOf(frame, "assistant", "to: Tell me about rivers").press("Alt+ArrowRight");
    await variantShown(frame, "assistant", "2/2");
    assert.equal(await lastAssistantText(frame), secondRiver);
    await frame.waitForFunction(() => document.activeElement?.closest("article")?.classList.contains("role-assistant") === true);
    await afterPaint(frame);
    await frame.locator("article.role-assistant").last().press("Alt+ArrowLeft");
    await variantShown(frame, "assistant", "1/2");
    assert.equal(await lastAssistantText(frame), firstRiver);
    assert.ok(page.url().includes("127.0.0.1"), "the browser did not navigate Back");
  });

  await step("trees: Edit & resend makes a sibling prompt (‹ 2/2 ›); ‹ shows the first prompt again with the reply last chosen under it", async () => {
    await messageAction(frame, "user", "Tell me about rivers of Europe", "Edit");
    await answerInputBox("Tell me about rivers of Asia");
    await waitTurn(frame, "Tell me about rivers of Asia");
    await variantShown(frame, "user", "2/2");
    assert.deepEqual(await userTexts(frame), ["Tell me about rivers of Asia"]);
    assert.equal(await frame.locator("article.role-assistant").count(), 1);
    const sent = JSON.stringify(fake.requests.at(-1).body.messages);
    assert.ok(!/Europe/.test(sent), `the other branch is not sent: ${sent}`);
    await shot("87-trees-sibling-prompt", { editorOnly: true });

    await arrow(frame, "user", "prev").click();
    await variantShown(frame, "user", "1/2");
    assert.deepEqual(await userTexts(frame), ["Tell me about rivers of Europe"]);
    assert.equal(await lastAssistantText(frame), firstRiver, "the reply last shown under it");
    assert.equal(await variantIn(frame, "assistant", "to: Tell me about rivers"), "1/2");
    await shot("88-trees-first-prompt-again", { editorOnly: true });
  });

  await step("trees: a second window follows a switch; a click on its stale screen switches nothing: it reloads and says so", async () => {
    const one = page;
    const frameOne = frame;
    const { context2, two, frameTwo } = await secondWindow("Tell me about rivers", "to: Tell me about rivers of Europe");
    try {
      await waitFor("the second window's history server", async () => historyServers().length === 2, 60_000);
      // Window one switches to the other prompt; window two shows it, untouched.
      await arrow(frameOne, "user", "next").click();
      await variantShown(frameOne, "user", "2/2");
      await frameTwo.waitForFunction(() => [...document.querySelectorAll("article.role-user .plain")].map((p) => p.textContent).join() === "Tell me about rivers of Asia", null, { timeout: 15_000 });
      await variantShown(frameTwo, "user", "2/2");
      page = two;
      await shot("89-second-window-followed-switch", { editorOnly: true });
      page = one;

      // Window two's screen falls behind while window one regenerates the reply there: window
      // two's ‹ (to Europe) is clicked on what it saw, a stale active leaf (1003).
      await holdViews(frameTwo);
      const before = await lastAssistantText(frameOne);
      await messageAction(frameOne, "assistant", "to: Tell me about rivers of Asia", "Regenerate");
      await variantShown(frameOne, "assistant", "2/2");
      const regenerated = await lastAssistantText(frameOne);
      assert.notEqual(regenerated, before);
      await frameTwo.waitForFunction(() => window.__held.some((v) => v.messages.some((m) => m.branch?.count === 2 && m.role === "assistant")), null, { timeout: 15_000 });
      assert.equal(await frameTwo.locator("article.role-assistant .branch").count(), 0, "window two's screen is behind");
      const requests = fake.requests.length;
      await releaseViewsAfter(frameTwo, () => arrow(frameTwo, "user", "prev").click());
      await noticeShown(frameTwo, /This chat changed in another window, so nothing was changed here/);
      await variantShown(frameTwo, "assistant", "2/2");
      assert.deepEqual(await userTexts(frameTwo), ["Tell me about rivers of Asia"], "the stale click switched nothing");
      assert.equal(await lastAssistantText(frameTwo), regenerated, "it shows the conversation as stored");
      assert.equal(fake.requests.length, requests);
      assert.deepEqual(await userTexts(frameOne), ["Tell me about rivers of Asia"]);
      page = two;
      await shot("90-stale-switch-refused", { editorOnly: true });
    } finally {
      page = one;
      await context2.close();
    }
  });

  // --- Version 3 (issue 24): history of other workspaces, and moving it here ---------------------
  // Two workspaces' histories in the one storage folder (the extension's global storage): a
  // first window on old-project (a git clone, so the server records its folder), then a window
  // on new-project. Each window is its own code-server run (one page per run: editor-e2e.md).
  const oldProject = join(root, "old-project");
  const newProject = join(root, "new-project");
  const sidebarRows = (text) => page.locator("#workbench\\.parts\\.sidebar .monaco-list-row", { hasText: text });
  const viewAction = (label) => page.locator(`#workbench\\.parts\\.sidebar .action-label[aria-label="${label}"]`).first();
  async function reopenOn(folder) {
    await closeBrowser();
    await stopCodeServer();
    await waitFor("the history servers to exit with code-server", () => historyServers().length === 0);
    await startCodeServer();
    await openWorkbench(folder);
    await showChatList();
  }

  await step("workspaces: a first window on old-project (a git clone) stores a conversation", async () => {
    mkdirSync(oldProject);
    mkdirSync(newProject);
    for (const git of [["init", "-q", oldProject], ["-C", oldProject, "remote", "add", "origin", "https://example.com/team/old-project.git"]]) {
      const r = spawnSync("git", git, { encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
    }
    writeFileSync(join(newProject, "hello.txt"), "Hello from new-project.\n");
    await reopenOn(oldProject);
    frame = await newChat();
    await send(frame, "Notes from the old project");
    await sidebarRows("Notes from the old project").first().waitFor({ state: "visible" });
    await shot("33-old-project");
  });

  await step("workspaces: in new-project, All Workspaces lists old-project's conversation; it opens read-only", async () => {
    await reopenOn(newProject);
    frame = await newChat();
    await send(frame, "Plans for the new project");
    await sidebarRows("Plans for the new project").first().waitFor({ state: "visible" });
    assert.equal(await sidebarRows("Notes from the old project").count(), 0, "the list shows this workspace's conversations");
    await viewAction("Show All Workspaces").click();
    await page.locator("#workbench\\.parts\\.sidebar", { hasText: "All workspaces" }).first().waitFor({ state: "visible" });
    const here = sidebarRows("new-project").first();
    const there = sidebarRows("old-project").first();
    await there.waitFor({ state: "visible" });
    assert.match(await here.innerText(), /this workspace · 1 conversation/);
    assert.match(await there.innerText(), /1 conversation/);
    await there.click(); // expands it
    await sidebarRows("Notes from the old project").first().click();
    await frame.locator("#elsewhere:not([hidden])").waitFor();
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 2);
    assert.deepEqual(await userTexts(frame), ["Notes from the old project"]);
    assert.match(await frame.locator("#elsewhere-text").innerText(), /This chat belongs to the workspace "old-project" and is read-only here\./);
    assert.equal(await frame.locator("#title").innerText(), "Notes from the old project");
    assert.ok(await frame.locator("#prompt").isDisabled(), "no reply from here");
    assert.ok(await frame.locator("#send").isDisabled());
    const actions = await frame.locator("article.msg button.action").allInnerTexts();
    assert.ok(actions.length > 0 && actions.every((a) => a === "Copy"), `only Copy: ${actions}`);
    await shot("34-all-workspaces-read-only");
    // The banner's move asks first; Cancel changes nothing.
    await frame.locator("#move-here").click();
    const dialog = page.locator(".monaco-dialog-box");
    await dialog.waitFor({ state: "visible" });
    assert.match(await dialog.innerText(), /Move 1 conversation from "old-project" into this workspace\?/);
    await dialog.locator(".monaco-button", { hasText: "Cancel" }).first().click();
    await dialog.waitFor({ state: "hidden" });
    assert.ok(await frame.locator("#elsewhere").isVisible(), "still read-only: nothing moved");
  });

  await step("workspaces: Continue in this workspace copies the chat here; its next turn reads this workspace's files", async () => {
    await frame.locator("#continue-here").click();
    await frame.locator("#elsewhere").waitFor({ state: "hidden" });
    await frame.waitForFunction(() => !document.getElementById("prompt").disabled);
    assert.ok((await noticeTexts(frame)).some((t) => /Continued here: a copy of the chat from "old-project" \(the original stays there\)/.test(t)));
    await send(frame, "Please read hello.txt here");
    assert.deepEqual(await userTexts(frame), ["Notes from the old project", "Please read hello.txt here"]);
    assert.match(await lastAssistantText(frame), /The file says: Hello from new-project\./);
    await waitFor("the copy under new-project", async () => /this workspace · 2 conversations/.test(await sidebarRows("new-project").first().innerText()));
    await shot("35-continued-here");
  });

  await step("workspaces: old-project's folder is deleted; Refresh offers to move its history; Move Here lists it under new-project", async () => {
    rmSync(oldProject, { recursive: true, force: true });
    await viewAction("Refresh Conversations").click();
    const offer = page.locator(".notification-toast", { hasText: "no longer exists" }).first();
    await offer.waitFor({ state: "visible" });
    assert.match(await offer.innerText(), /The folder of "old-project" \(.*old-project\) no longer exists\. Move its conversation into this workspace\?/);
    await waitFor("the list to say the folder is gone", async () => /folder no longer exists/.test(await sidebarRows("old-project").first().innerText().catch(() => "")));
    await sleep(800); // the toast slides in
    await shot("36-move-offer");
    await offer.locator(".monaco-button", { hasText: "Move Here" }).click();
    const moved = page.locator(".notification-toast", { hasText: "Moved 1 conversation" }).first();
    await moved.waitFor({ state: "visible" });
    assert.match(await moved.innerText(), /Moved 1 conversation here from "old-project"\./);
    await waitFor("old-project to leave the list", async () => (await sidebarRows("old-project").count()) === 0);
    await waitFor("new-project to hold it", async () => /this workspace · 3 conversations/.test(await sidebarRows("new-project").first().innerText()));
    await shot("37-moved");
    // This workspace's own list now holds the moved conversation beside the copy.
    await viewAction("Show This Workspace Only").click();
    await waitFor("the flat list of this workspace", async () => (await sidebarRows("new-project").count()) === 0);
    await waitFor("both under new-project", async () => (await sidebarRows("Notes from the old project").count()) === 2);
    const original = sidebarRows("Notes from the old project").filter({ hasText: "2 messages" }).first();
    await original.click();
    await frame.waitForFunction(() => document.querySelectorAll("article.msg").length === 2 && document.getElementById("elsewhere").hidden);
    assert.ok(!(await frame.locator("#prompt").isDisabled()), "it is this workspace's now: it can be continued");
    await shot("38-moved-listed-here");
  });

  await step("workspaces: Move History from Another Workspace… (QuickPick, confirmed): an id in both moves nothing, said in words; after deleting one, all of it moves", async () => {
    // A third workspace's history, imported with the CLI into the same storage folder, holding a
    // conversation id that new-project also holds.
    const third = pathToFileURL(join(root, "third-project")).href;
    const here = pathToFileURL(newProject).href;
    const line = (workspace, conversationId, content) => JSON.stringify({ type: "message", workspace, conversationId, message: { role: "user", content, timestamp: Date.now() } });
    const file = join(root, "third.jsonl");
    writeFileSync(
      file,
      [
        JSON.stringify({ type: "header", format: "chat-history", version: 1 }),
        line(third, "team-notes", "Team notes from the third project"),
        line(third, "shared-id", "Shared notes (third project)"),
        line(here, "shared-id", "Shared notes (new project)"),
      ].join("\n") + "\n",
    );
    const store = join(dirs.userData, "User", "globalStorage", EXTENSION_ID);
    const r = spawnSync(PYTHON, ["-m", "chat_history.cli", "--db", store, "import", file], { env, encoding: "utf8" });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    await viewAction("Refresh Conversations").click();
    await sidebarRows("Shared notes (new project)").first().waitFor({ state: "visible" });

    const moveFromThird = async () => {
      await runCommand("Chat Panel: Move History from Another Workspace…", { opensQuickInput: true });
      const item = page.locator(".quick-input-widget .quick-input-list .monaco-list-row", { hasText: "third-project" }).first();
      await item.waitFor({ state: "visible" });
      assert.match(await item.innerText(), /2 conversations/);
      await shot("39-move-quickpick");
      await item.click();
      const dialog = page.locator(".monaco-dialog-box");
      await dialog.waitFor({ state: "visible" });
      assert.match(await dialog.innerText(), /Move 2 conversations from "third-project" into this workspace\?/);
      assert.match(await dialog.innerText(), /Nothing is deleted/);
      await shot("40-move-confirm");
      await dialog.locator(".monaco-button", { hasText: "Move" }).first().click();
    };
    await moveFromThird();
    const refused = page.locator(".monaco-dialog-box", { hasText: "Nothing was moved" });
    await refused.waitFor({ state: "visible" });
    assert.match(await refused.innerText(), /Nothing was moved from "third-project"\./);
    assert.match(await refused.innerText(), /Conversation 'shared-id' exists in both workspaces \(1 in all\)\. Both workspaces keep all their conversations\./);
    await shot("41-move-refused");
    await refused.locator(".monaco-button").first().click();
    await refused.waitFor({ state: "hidden" });
    // Nothing lost, nothing moved.
    assert.equal(await sidebarRows("Team notes from the third project").count(), 0);
    assert.equal(await sidebarRows("Shared notes (new project)").count(), 1);

    // Delete this workspace's copy of the clashing id (the list's trash button), then move again.
    const mine = sidebarRows("Shared notes (new project)").first();
    await mine.hover();
    await mine.locator('.action-label[aria-label="Delete Conversation"]').click();
    const dialog = page.locator(".monaco-dialog-box");
    await dialog.waitFor({ state: "visible" });
    await dialog.locator(".monaco-button", { hasText: "Delete" }).first().click();
    await waitFor("the deleted chat to leave the list", async () => (await sidebarRows("Shared notes (new project)").count()) === 0);
    await moveFromThird();
    const moved = page.locator(".notification-toast", { hasText: "Moved 2 conversations" }).first();
    await moved.waitFor({ state: "visible" });
    assert.match(await moved.innerText(), /Moved 2 conversations here from "third-project"\./);
    await sidebarRows("Team notes from the third project").first().waitFor({ state: "visible" });
    await sidebarRows("Shared notes (third project)").first().waitFor({ state: "visible" });
    await sleep(800);
    await shot("42-moved-from-quickpick");
  });

  // --- Version 4 (issue 32 item 6): Import History… from other tools ----------------------------
  // A window on import-project, whose Claude Code sessions (~/.claude/projects/<the folder with
  // every non-alphanumeric character as "-">/) and Codex rollout (~/.codex/sessions/…, its cwd
  // inside) are the repository's fixtures with their folder rewritten. The newer sessions' times
  // move to yesterday (so they stay within maxAgeHours' default); the older Claude Code session
  // (October 2026) is past it, so the preview must warn that it goes at the next read.
  const importProject = join(root, "import-project");
  const FIXTURES = resolve(here, "..", "..", "..", "tests", "fixtures", "imports");
  const RECENT = "7f3c2a10-5b1e-4c2d-9e8f-0a1b2c3d4e5f";
  const OLD = "0b9d4e21-aaaa-4bbb-8ccc-123456789abc";
  function placeFixture(from, to) {
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    const text = readFileSync(from, "utf8").replaceAll("/home/me/shop", importProject).replaceAll("2026-11-20T", `${yesterday}T`);
    mkdirSync(dirname(to), { recursive: true });
    writeFileSync(to, text);
  }
  /** The badge a file decoration draws at the end of a list row (CSS ::after content, no text node). */
  const rowBadges = (row) => row.evaluate((el) => [el, ...el.querySelectorAll("*")].map((e) => getComputedStyle(e, "::after").content).filter((c) => /^"[A-Z]{2}"$/.test(c)));
  const quickPickRows = () => page.locator(".quick-input-widget .quick-input-list .monaco-list-row");
  async function importFromPick(label) {
    await runCommand("Chat Panel: Import History…", { opensQuickInput: true });
    const item = quickPickRows().filter({ hasText: label }).first();
    await item.waitFor({ state: "visible" });
    return item;
  }

  await step("imports: Import History… lists the tools with history of this folder, with counts; the preview says what is skipped and what retention deletes; Cancel imports nothing", async () => {
    mkdirSync(importProject);
    const claude = join(dirs.home, ".claude", "projects", importProject.replace(/[^A-Za-z0-9]/g, "-"));
    const shop = join(FIXTURES, "claude-code", "-home-me-shop");
    placeFixture(join(shop, `${RECENT}.jsonl`), join(claude, `${RECENT}.jsonl`));
    placeFixture(join(shop, RECENT, "subagents", "agent-a1b2.jsonl"), join(claude, RECENT, "subagents", "agent-a1b2.jsonl"));
    placeFixture(join(shop, `${OLD}.jsonl`), join(claude, `${OLD}.jsonl`));
    const rollout = "rollout-2026-11-20T10-00-00-019a6f0e-1d2c-7b3a-9e8d-5c4b3a291807.jsonl";
    placeFixture(join(FIXTURES, "codex", "sessions", "2026", "11", "20", rollout), join(dirs.home, ".codex", "sessions", "2026", "11", "20", rollout));
    await reopenOn(importProject);
    await page.locator("#workbench\\.parts\\.sidebar", { hasText: "Import History…" }).first().waitFor({ state: "visible" });
    const claudeItem = await importFromPick("Claude Code");
    const rows = await quickPickRows().allInnerTexts();
    assert.equal(rows.length, 2, `only the tools with history of this folder: ${JSON.stringify(rows)}`);
    assert.match(await claudeItem.innerText(), /Claude Code[\s\S]*4 conversations · 14 messages[\s\S]*4 new · 0 updated · 0 unchanged/);
    const codexItem = quickPickRows().filter({ hasText: "Codex" }).first();
    assert.match(await codexItem.innerText(), /Codex[\s\S]*1 conversation · 6 messages[\s\S]*1 new · 0 updated · 0 unchanged/);
    await shot("60-import-quickpick");
    await claudeItem.click();
    const dialog = page.locator(".monaco-dialog-box");
    await dialog.waitFor({ state: "visible" });
    const text = await dialog.innerText();
    assert.match(text, /Import 4 conversations from Claude Code\?/);
    assert.match(text, /4 conversations of this folder, 14 messages: 4 new, 0 updated, 0 unchanged\./);
    assert.match(text, /• Why is the cart total off by a cent\? — 4 messages, 4 deleted at the next read\n[\s\S]*• Fix the Safari checkout date test — 6 messages\n/);
    assert.match(text, /Not carried over:[\s\S]*1 tool result \(no tool call before it\)/);
    assert.match(text, /Your retention settings delete 6 messages of 2 conversations at the next read: turns older than 720 hours \(chatHistory\.maxAgeHours\)/);
    const buttons = await dialog.locator(".monaco-button").allInnerTexts();
    assert.deepEqual(buttons.map((b) => b.trim()).sort(), ["Cancel", "Import 4 conversations anyway", "Open Retention Settings"]);
    await shot("61-import-preview");
    await dialog.locator(".monaco-button", { hasText: "Cancel" }).first().click();
    await dialog.waitFor({ state: "hidden" });
    await viewAction("Refresh Conversations").click();
    await sleep(1000);
    assert.equal(await sidebarRows("Claude Code").count(), 0, "Cancel imported nothing");
  });

  await step("imports: Codex is imported; the list shows it with its source and opening it shows the imported messages; then Claude Code, anyway", async () => {
    await (await importFromPick("Codex")).click();
    const dialog = page.locator(".monaco-dialog-box");
    await dialog.waitFor({ state: "visible" });
    assert.match(await dialog.innerText(), /Import 1 conversation from Codex\?[\s\S]*Add a test for the discount code field\. — 6 messages/);
    assert.doesNotMatch(await dialog.innerText(), /retention/, "nothing of it is past the age limit");
    await dialog.locator(".monaco-button", { hasText: "Import 1 conversation" }).first().click();
    const done = page.locator(".notification-toast", { hasText: "Imported 6 messages" }).first();
    await done.waitFor({ state: "visible" });
    assert.match(await done.innerText(), /Imported 6 messages into 1 conversation from Codex\./);
    const codexRow = sidebarRows("Add a test for the discount code field").first();
    await codexRow.waitFor({ state: "visible" });
    assert.match(await codexRow.innerText(), /Codex · 6 messages/);
    await waitFor("the Codex badge on its row", async () => (await rowBadges(codexRow)).includes('"CX"'));
    await codexRow.click();
    frame = await chatFrame();
    await frame.waitForFunction(() => document.getElementById("source")?.textContent === "Imported from Codex" && !document.getElementById("source").hidden);
    assert.deepEqual(await userTexts(frame), ["Add a test for the discount code field."]);
    assert.match(await frame.locator("#messages").innerText(), /Added tests\/discount\.spec/);
    await shot("62-imported-codex", { editorOnly: true });

    await (await importFromPick("Claude Code")).click();
    await dialog.waitFor({ state: "visible" });
    await dialog.locator(".monaco-button", { hasText: "Import 4 conversations anyway" }).first().click();
    const claudeDone = page.locator(".notification-toast", { hasText: "from Claude Code" }).first();
    await claudeDone.waitFor({ state: "visible" });
    assert.match(await claudeDone.innerText(), /Imported 14 messages into 4 conversations from Claude Code\./);
    const claudeRow = sidebarRows("Fix the Safari checkout date test").first();
    await claudeRow.waitFor({ state: "visible" });
    assert.match(await claudeRow.innerText(), /Claude Code · 6 messages/);
    await waitFor("the Claude Code badge on its row", async () => (await rowBadges(claudeRow)).includes('"CC"'));
    await claudeRow.click();
    await frame.waitForFunction(() => document.getElementById("source")?.textContent === "Imported from Claude Code");
    await frame.waitForFunction(() => document.querySelectorAll("article.role-user").length > 0);
    assert.match((await userTexts(frame))[0], /The checkout test fa/);
    assert.equal(await frame.locator("#title").innerText(), "Fix the Safari checkout date test");
    await sleep(800);
    await shot("63-imported-claude-code", { editorOnly: true });
    // Importing again finds nothing new: no confirmation, only the words.
    await (await importFromPick("Codex")).click();
    const nothing = page.locator(".notification-toast", { hasText: "Nothing new to import from Codex" }).first();
    await nothing.waitFor({ state: "visible" });
  });
  exitCode = 0;
} catch {
  exitCode = 1;
} finally {
  await closeBrowser();
  await stopCodeServer();
  await fake.close();
  if (exitCode !== 0) {
    writeFileSync(join(ARTIFACTS, "code-server.log"), serverLog);
    const logs = join(dirs.userData, "logs");
    if (existsSync(logs)) spawnSync("cp", ["-r", logs, join(ARTIFACTS, "vscode-logs")]);
  }
  if (process.env.E2E_KEEP) console.log(`# kept ${root}`);
  else rmSync(root, { recursive: true, force: true });
  const passed = results.filter((r) => r.ok).length;
  console.log(`# e2e took ${since()}; screenshots in ${ARTIFACTS}`);
  console.log(`${passed} passed, ${results.length - passed} failed`);
  process.exit(exitCode);
}
