#!/usr/bin/env node
// Bundles the extension (Node, CommonJS, `vscode` external) and the webview script (browser)
// with esbuild, so the .vsix needs no node_modules. `--tests` bundles test/*.test.ts instead.
import { build } from "esbuild";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const common = { bundle: true, sourcemap: true, logLevel: "warning", absWorkingDir: root, target: "es2022" };

if (process.argv.includes("--tests")) {
  const tests = readdirSync(join(root, "test")).filter((f) => f.endsWith(".test.ts")).map((f) => `test/${f}`);
  await build({ ...common, entryPoints: tests, outdir: "dist-test/test", platform: "node", format: "cjs", external: ["vscode"] });
} else {
  await build({ ...common, minify: true, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node", format: "cjs", external: ["vscode"] });
  await build({ ...common, minify: true, entryPoints: ["src/webview/main.ts"], outfile: "dist/webview.js", platform: "browser", format: "iife" });
}
