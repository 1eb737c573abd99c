// chat-history mcp --http checked by the MCP project's conformance suite
// (@modelcontextprotocol/conformance), once per protocol revision: every server scenario the
// suite's frozen requirements/<revision>.yaml lists for it (required or run-for-visibility),
// except what MCP_CONFORMANCE_EXCLUDE names (the Makefile says why, one by one): a scenario
// (`name`) or one check of it (`name/check-id`, the rest of the scenario still counting). A
// scenario fails the test when any check not excluded is a FAILURE, or when the suite exits
// non-zero for any other reason; warnings and skipped checks are reported. The suite cannot send the server's bearer token, so it
// talks to a local forwarder that adds it and passes every other header (Host, Origin)
// untouched. CHAT_HISTORY_PYTHON: a Python with chat-history-server installed.
// MCP_CONFORMANCE_RESULTS: a file to write the per-scenario results to (JSON);
// MCP_CONFORMANCE_ONLY: run only these scenarios (names, space-separated).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { parse } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const python = process.env.CHAT_HISTORY_PYTHON ?? "python3";
const workspace = "file:///work/conformance";
const revisions = ["2025-11-25", "2026-07-28"];
const excluded = new Set((process.env.MCP_CONFORMANCE_EXCLUDE ?? "").split(/\s+/).filter(Boolean));
const only = new Set((process.env.MCP_CONFORMANCE_ONLY ?? "").split(/\s+/).filter(Boolean));
const excludedChecks = (scenario) =>
  new Set([...excluded].filter((e) => e.startsWith(`${scenario}/`)).map((e) => e.slice(scenario.length + 1)));
const require = createRequire(import.meta.url);
const suiteRoot = dirname(require.resolve("@modelcontextprotocol/conformance/package.json"));
const cli = join(suiteRoot, "dist", "index.js");

/** The server scenarios a revision's frozen requirements list: required, and not scored but
 * run (pending against the suite's own fixture); extensions are not this server's. */
function scenariosOf(revision) {
  const requirements = parse(readFileSync(join(suiteRoot, "requirements", `${revision}.yaml`), "utf8"));
  const visible = (requirements.not_scored ?? [])
    .filter((entry) => entry.leg === "server" && entry.reason !== "extension")
    .map((entry) => entry.scenario);
  return [...requirements.server, ...visible];
}

const folder = mkdtempSync(join(tmpdir(), "mcp-conformance-"));
const db = join(folder, "history.sqlite3");
const tokenFile = join(folder, "token");
// The MCP Inspector test's history: one seed for both suites.
execFileSync(python, [join(here, "..", "mcp-inspector", "seed.py"), db, workspace]);

/** Start the server on a free port; resolves to its URL once it says where it listens. */
function startServer() {
  const child = spawn(
    python,
    ["-m", "chat_history.cli", "--db", db, "mcp", "--workspace", workspace,
      "--http", "0", "--token-file", tokenFile],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let said = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL from the server: ${said}`)), 60_000);
    child.stderr.on("data", (chunk) => {
      said += chunk;
      const found = /serving (http:\/\/\S+);/.exec(said);
      if (found) {
        clearTimeout(timer);
        resolve({ child, url: new URL(found[1]) });
      }
    });
    child.on("exit", (code) => reject(new Error(`the server exited (${code}): ${said}`)));
  });
}

/** A forwarder on a free port that adds the bearer token to every request. */
function startForwarder(target, token) {
  const forwarder = http.createServer((request, response) => {
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: request.method,
        path: request.url,
        headers: { ...request.headers, authorization: `Bearer ${token}` },
      },
      (answer) => {
        response.writeHead(answer.statusCode, answer.headers);
        answer.pipe(response);
      },
    );
    upstream.on("error", () => response.destroy());
    request.pipe(upstream);
    response.on("close", () => upstream.destroy());
  });
  return new Promise((resolve) => {
    forwarder.listen(0, "127.0.0.1", () => resolve(forwarder));
  });
}

const { child, url } = await startServer();
const token = readFileSync(tokenFile, "utf8").trim();
const forwarder = await startForwarder(url, token);
const suiteUrl = `http://127.0.0.1:${forwarder.address().port}${url.pathname}`;
const results = [];

test.after(async () => {
  forwarder.close();
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill();
  await exited; // before its folder goes: SQLite's files close with it
  const summary = results.map((r) => `${r.revision} ${r.scenario}: ${r.outcome}${r.note ? ` (${r.note})` : ""}`);
  console.log(`\nMCP conformance (${require("@modelcontextprotocol/conformance/package.json").version}):\n  ${summary.join("\n  ")}`);
  if (process.env.MCP_CONFORMANCE_RESULTS) {
    writeFileSync(process.env.MCP_CONFORMANCE_RESULTS, JSON.stringify(results, null, 2));
  }
  rmSync(folder, { recursive: true, force: true });
});

/** One scenario run by the suite (asynchronously: the forwarder serves it from this
 * process), its exit status, output and checks. */
function run(revision, scenario) {
  const out = mkdtempSync(join(folder, "out-"));
  const suite = spawn(
    process.execPath,
    [cli, "server", "--url", suiteUrl, "--scenario", scenario, "--spec-version", revision, "-o", out],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const done = { status: null, stdout: "", stderr: "" };
  suite.stdout.on("data", (chunk) => (done.stdout += chunk));
  suite.stderr.on("data", (chunk) => (done.stderr += chunk));
  const timer = setTimeout(() => suite.kill(), 120_000);
  return new Promise((resolve) => {
    suite.on("close", (status) => {
      clearTimeout(timer);
      done.status = status;
      const files = readdirSync(out, { recursive: true }).filter((f) => f.endsWith("checks.json"));
      const checks = files.length ? JSON.parse(readFileSync(join(out, files[0]), "utf8")) : [];
      resolve({ done, checks });
    });
  });
}

for (const revision of revisions) {
  for (const scenario of scenariosOf(revision)) {
    if (only.size && !only.has(scenario)) continue;
    if (excluded.has(scenario)) {
      results.push({ revision, scenario, outcome: "excluded" });
      continue;
    }
    test(`${revision} ${scenario}`, async () => {
      const { done, checks } = await run(revision, scenario);
      const count = (status) => checks.filter((c) => c.status === status).length;
      const waived = excludedChecks(scenario);
      const failures = checks.filter((c) => c.status === "FAILURE" && !waived.has(c.id));
      const excusedFailures = checks.filter((c) => c.status === "FAILURE" && waived.has(c.id));
      const skippedWhole = checks.length === 0 && /SKIPPED/.test(done.stdout);
      // The suite exits 1 for any failed check; one excluded by name does not fail the test.
      const exitedBadly = done.status !== 0 && !(done.status === 1 && excusedFailures.length && !failures.length);
      const outcome = exitedBadly || failures.length ? "failed" : skippedWhole ? "skipped" : "passed";
      const note = [
        count("SUCCESS") && `${count("SUCCESS")} checks passed`,
        excusedFailures.length && `excluded: ${excusedFailures.map((c) => c.id).join(", ")}`,
        count("WARNING") && `${count("WARNING")} warnings: ${checks.filter((c) => c.status === "WARNING").map((c) => c.id).join(", ")}`,
        count("SKIPPED") && `${count("SKIPPED")} skipped`,
        failures.length && `failed: ${failures.map((c) => `${c.id}: ${c.errorMessage ?? ""}`).join("; ")}`,
      ].filter(Boolean).join("; ");
      results.push({ revision, scenario, outcome, note });
      assert.equal(outcome === "failed", false, `${scenario} at ${revision}: ${note}\n${done.stdout}\n${done.stderr}`);
    });
  }
}
