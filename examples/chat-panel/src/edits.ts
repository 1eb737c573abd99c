/**
 * The edits of the panel's message actions, as pure rules on its state: which row an edit, a
 * regenerate or a delete rewinds from, the rows a rewind or an edit leaves, and redaction.
 */

import type { StoredMessage } from "chat-history-client";
import { fromStored, withoutStaleRetry, type PanelState } from "./state";

/** What edit-and-resend or regenerate does to the stored rows, found from the loaded ones. */
export interface Rewind {
  /** `truncate` from this row (it and every later row go). */
  fromId: number;
  /** The prompt to run again: the edited text (edit) or the stored prompt kept (regenerate). */
  prompt: string;
  /** Whether the prompt is still stored (regenerate) or must be appended (edit). */
  promptStored: boolean;
}

/**
 * Edit and resend on the user row `id`: truncate from that row, then send `text` as a new prompt.
 * Regenerate on any row of a turn: truncate from the first row after the turn's prompt and run
 * the turn again. Null when the row is not loaded, or (regenerate) when the turn's prompt is not
 * loaded or nothing follows it.
 */
export function rewindFor(state: PanelState, id: number, kind: "edit" | "regenerate", text = ""): Rewind | null {
  const index = state.messages.findIndex((m) => m.id === id);
  const target = state.messages[index];
  if (target === undefined || target.id === null) return null;
  if (kind === "edit") {
    if (target.role !== "user") return null;
    return { fromId: target.id, prompt: text, promptStored: false };
  }
  // The turn's prompt: the nearest user row at or before the target in the same turn.
  let promptIndex = -1;
  for (let i = index; i >= 0; i--) {
    const m = state.messages[i];
    if (m.role === "user" && m.turn === target.turn) {
      promptIndex = i;
      break;
    }
  }
  if (promptIndex < 0) return null;
  const after = state.messages.slice(promptIndex + 1).find((m) => m.id !== null);
  if (after?.id == null) return null;
  return { fromId: after.id, prompt: state.messages[promptIndex].content, promptStored: true };
}

/**
 * Version 5: what Regenerate and Edit & resend make: a new branch, nothing deleted. Regenerate is
 * `beginReply` with `parentId` = the turn's prompt (a sibling of its replies); Edit & resend
 * `append` of the new prompt with `parentId` = the edited prompt's parent (a sibling prompt).
 */
export interface Branch {
  /** The row the new branch follows (null: a new first row). */
  parentId: number | null;
  /** The prompt to run: the edited text (edit) or the stored prompt (regenerate). */
  prompt: string;
  /** Whether the prompt is stored already (regenerate) or is appended as the branch's first row (edit). */
  promptStored: boolean;
  /** The rows shown that stay (the new branch replaces the ones after them on screen). */
  keep: number;
}

/**
 * Version 5: the branch Edit & resend on the user row `id` (`text`) or Regenerate on any row of a
 * turn makes. Null when the row is not loaded, or the server gave no `parentId` (an older one),
 * or (regenerate) the turn's prompt is not loaded.
 */
export function branchFor(state: PanelState, id: number, kind: "edit" | "regenerate", text = ""): Branch | null {
  const index = state.messages.findIndex((m) => m.id === id);
  const target = state.messages[index];
  if (target === undefined || target.id === null) return null;
  if (kind === "edit") {
    if (target.role !== "user" || target.parentId === undefined) return null;
    return { parentId: target.parentId, prompt: text, promptStored: false, keep: index };
  }
  let promptIndex = -1;
  for (let i = index; i >= 0; i--) {
    const m = state.messages[i];
    if (m.role === "user" && m.turn === target.turn) {
      promptIndex = i;
      break;
    }
  }
  const prompt = state.messages[promptIndex];
  if (prompt?.id == null) return null;
  return { parentId: prompt.id, prompt: prompt.content, promptStored: true, keep: promptIndex + 1 };
}

/** Version 5: the rows shown once a new branch starts after the first `keep` ones (the others stay stored, a variant away). */
export function branched(state: PanelState, keep: number): PanelState {
  return withoutStaleRetry({ ...state, messages: state.messages.slice(0, keep) });
}

/** Rows of the panel that a `truncate` from `fromId` removed. */
export function truncated(state: PanelState, fromId: number): PanelState {
  return withoutStaleRetry({ ...state, messages: state.messages.filter((m) => m.id === null || m.id < fromId) });
}

/** Rows of the panel that a `deleteTurns` removed. */
export function turnsDeleted(state: PanelState, turns: number[]): PanelState {
  const gone = new Set(turns);
  return withoutStaleRetry({ ...state, messages: state.messages.filter((m) => m.turn === null || !gone.has(m.turn)) });
}

/** A row `editMessage` changed. */
export function rowEdited(state: PanelState, row: StoredMessage): PanelState {
  return { ...state, messages: state.messages.map((m) => (m.id === row.id ? fromStored(row) : m)) };
}

export const REDACTED = "[redacted]";

/**
 * The content after redacting `secret` from it: every occurrence replaced by "[redacted]", or the
 * whole content when `secret` is empty. Null when `secret` does not occur (nothing to change).
 */
export function redact(content: string, secret: string): string | null {
  if (secret === "") return content === REDACTED ? null : REDACTED;
  if (!content.includes(secret)) return null;
  return content.split(secret).join(REDACTED);
}
