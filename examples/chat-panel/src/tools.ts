/**
 * The panel's one tool: read a text file of the workspace. Read-only, size-limited, and
 * confined to the workspace folders: the path is resolved (symlinks included) and refused when
 * it lands outside every folder. Errors are answered to the model as text, never thrown, so a
 * bad call becomes a tool result it can read. No `vscode` import.
 */

import { open, realpath, stat } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";
import type { JsonObject } from "chat-history-client";
import type { ToolDefinition } from "./providers";

export const READ_FILE_MAX_BYTES = 64 * 1024;

export const READ_FILE_TOOL: ToolDefinition = {
  name: "read_file",
  description: `Read a UTF-8 text file of the user's workspace (read-only; at most ${READ_FILE_MAX_BYTES / 1024} KB are returned).`,
  parameters: {
    type: "object",
    properties: { path: { type: "string", description: "Path relative to the workspace folder." } },
    required: ["path"],
  },
};

function inside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/** Runs `read_file` with the model's arguments; answers the text to record as the tool result. */
export async function readWorkspaceFile(
  folders: string[],
  args: JsonObject | string,
  maxBytes = READ_FILE_MAX_BYTES,
): Promise<string> {
  const path = typeof args === "object" && typeof args.path === "string" ? args.path : null;
  if (path === null || path.trim() === "") return "Error: read_file needs a `path` (a string).";
  if (folders.length === 0) return "Error: no workspace folder is open.";
  if (path.includes("\0")) return "Error: invalid path.";
  const roots = await Promise.all(folders.map((f) => realpath(f).catch(() => resolve(f))));
  const candidate = isAbsolute(path) ? resolve(path) : resolve(roots[0], path);
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    return `Error: ${path} does not exist in the workspace.`;
  }
  if (!roots.some((root) => inside(root, real))) return `Error: ${path} is outside the workspace; only workspace files can be read.`;
  const info = await stat(real);
  if (!info.isFile()) return `Error: ${path} is not a file.`;
  const handle = await open(real, "r");
  try {
    const buffer = Buffer.alloc(Math.min(info.size, maxBytes));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const bytes = buffer.subarray(0, bytesRead);
    if (bytes.includes(0)) return `Error: ${path} is a binary file.`;
    const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
    return info.size > maxBytes ? `${text}\n[… cut: the file has ${info.size} bytes, only the first ${maxBytes} are shown]` : text;
  } finally {
    await handle.close();
  }
}
