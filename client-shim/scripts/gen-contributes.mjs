#!/usr/bin/env node
/**
 * Writes `contributes.configuration` of a package.json from the repository's
 * settings.schema.json, the one source of truth for the `chatHistory.*` settings, so that the
 * keys show in VS Code's Settings UI with the server's own defaults, bounds and descriptions.
 *
 *   node scripts/gen-contributes.mjs            # update ./package.json
 *   node scripts/gen-contributes.mjs --check    # exit 1 if ./package.json has drifted
 *   node scripts/gen-contributes.mjs --schema ../settings.schema.json --package path/to/extension/package.json
 *
 * The schema already has the shape of a `contributes.configuration` block ({title, properties}
 * with flat dotted keys); it is copied as is, minus top-level `$`-keys ($schema, $id, $comment).
 *
 * An extension with settings of its own declares `contributes.configuration` as an array of
 * blocks (VS Code shows one section per block): the generator then writes, and the check reads,
 * only the block whose title is the schema's (appended when missing); the others are kept.
 */

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
export const DEFAULT_SCHEMA = resolve(here, "..", "..", "settings.schema.json");
export const DEFAULT_PACKAGE = resolve(here, "..", "package.json");

/** The `contributes.configuration` block for a settings schema. */
export function configurationFromSchema(schema) {
  if (typeof schema !== "object" || schema === null || typeof schema.properties !== "object") {
    throw new Error("settings schema must be an object with `properties`");
  }
  const block = {};
  for (const [key, value] of Object.entries(schema)) {
    if (!key.startsWith("$")) block[key] = structuredClone(value);
  }
  return block;
}

/** Index of the schema's block in an array `contributes.configuration` (by title), or -1. */
function blockIndex(blocks, title) {
  return blocks.findIndex((block) => typeof block === "object" && block !== null && block.title === title);
}

/**
 * `pkg` with its `contributes.configuration` replaced (other contributions kept, key order kept);
 * in an array of blocks, only the block titled as the schema is replaced (or appended).
 */
export function withConfiguration(pkg, schema) {
  const block = configurationFromSchema(schema);
  const current = pkg.contributes?.configuration;
  let configuration = block;
  if (Array.isArray(current)) {
    configuration = [...current];
    const index = blockIndex(configuration, block.title);
    if (index >= 0) configuration[index] = block;
    else configuration.push(block);
  }
  const contributes = { ...(pkg.contributes ?? {}), configuration };
  return { ...pkg, contributes };
}

/** Differences between the package's block and the schema's, as readable lines (empty: in sync). */
export function drift(pkg, schema) {
  const want = configurationFromSchema(schema);
  let have = pkg.contributes?.configuration;
  if (have === undefined) return ["package.json has no contributes.configuration"];
  if (Array.isArray(have)) {
    const index = blockIndex(have, want.title);
    if (index < 0) return [`package.json has no contributes.configuration block titled ${JSON.stringify(want.title)}`];
    have = have[index];
  }
  const lines = [];
  if (!isDeepStrictEqual(have.title, want.title)) lines.push(`title: ${JSON.stringify(have.title)} != ${JSON.stringify(want.title)}`);
  const haveProps = have.properties ?? {};
  const wantProps = want.properties;
  for (const key of Object.keys(wantProps)) {
    if (!(key in haveProps)) lines.push(`missing ${key}`);
    else if (!isDeepStrictEqual(haveProps[key], wantProps[key])) {
      lines.push(`differs ${key}: package.json ${JSON.stringify(haveProps[key])} != schema ${JSON.stringify(wantProps[key])}`);
    }
  }
  for (const key of Object.keys(haveProps)) if (!(key in wantProps)) lines.push(`extra ${key} (not in the schema)`);
  for (const key of Object.keys(have)) if (key !== "title" && key !== "properties" && !(key in want)) lines.push(`extra field ${key}`);
  for (const key of Object.keys(want)) if (key !== "title" && key !== "properties" && !isDeepStrictEqual(have[key], want[key])) lines.push(`differs field ${key}`);
  if (lines.length === 0 && JSON.stringify(Object.keys(haveProps)) !== JSON.stringify(Object.keys(wantProps))) {
    lines.push("same keys in a different order (the Settings UI shows them in this order)");
  }
  return lines;
}

function main(argv) {
  let check = false;
  let schemaPath = DEFAULT_SCHEMA;
  let packagePath = DEFAULT_PACKAGE;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--check") check = true;
    else if (arg === "--schema") schemaPath = resolve(argv[++i]);
    else if (arg === "--package") packagePath = resolve(argv[++i]);
    else {
      console.error(`unknown argument ${arg}\nusage: gen-contributes.mjs [--check] [--schema FILE] [--package FILE]`);
      return 2;
    }
  }
  const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
  const pkg = JSON.parse(readFileSync(packagePath, "utf8"));
  if (check) {
    const lines = drift(pkg, schema);
    if (lines.length > 0) {
      console.error(`${packagePath}: contributes.configuration has drifted from ${schemaPath}:`);
      for (const line of lines) console.error(`  - ${line}`);
      console.error("Run `npm run gen:contributes` to regenerate it.");
      return 1;
    }
    console.log(`${packagePath}: contributes.configuration matches ${schemaPath}`);
    return 0;
  }
  writeFileSync(packagePath, `${JSON.stringify(withConfiguration(pkg, schema), null, 2)}\n`);
  console.log(`${packagePath}: contributes.configuration written from ${schemaPath}`);
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
