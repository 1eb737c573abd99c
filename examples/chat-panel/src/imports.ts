/**
 * "Import History…" (protocol version 4, "History from other tools"): which tools' history the
 * server finds for this folder (a dry run of `importFrom` per source), the words of the
 * QuickPick, the preview and its confirmation, and where an imported conversation came from
 * (`metadata.import.source`). What retention will delete is the server's answer (`retention`,
 * computed by its own rule under the session's settings): the panel only puts it in words. No
 * `vscode` here: the extension shows what these return.
 */

import { IMPORT_SOURCES } from "chat-history-client";
import type { ChatHistoryClient, ConversationInfo, ImportSource, PlannedImport } from "chat-history-client";
import { plural } from "./state";

/** Each source as its users call it. */
export const SOURCE_LABELS: Record<ImportSource, string> = {
  "claude-code": "Claude Code",
  codex: "Codex",
  "copilot-chat": "Copilot Chat",
  "copilot-cli": "Copilot CLI",
  "gemini-cli": "Gemini CLI",
  cline: "Cline",
  "roo-code": "Roo Code",
  continue: "Continue",
  opencode: "OpenCode",
};

/** Each source in two letters: the badge at the end of an imported conversation's row in the list (its tooltip names the tool). */
export const SOURCE_BADGES: Record<ImportSource, string> = {
  "claude-code": "CC",
  codex: "CX",
  "copilot-chat": "CP",
  "copilot-cli": "CL",
  "gemini-cli": "GM",
  cline: "CN",
  "roo-code": "RC",
  continue: "CT",
  opencode: "OC",
};

/** The id of the tool an imported conversation came from (`metadata.import.source`); null: not imported. */
export function importedSource(info: Pick<ConversationInfo, "metadata"> | undefined): string | null {
  const imported = info?.metadata?.["import"];
  if (typeof imported !== "object" || imported === null || Array.isArray(imported)) return null;
  const source = (imported as Record<string, unknown>)["source"];
  return typeof source === "string" && source !== "" ? source : null;
}

/** A source's badge: its two letters, else the first two of its id, upper case. */
export function sourceBadge(source: string): string {
  return (SOURCE_BADGES as Record<string, string>)[source] ?? source.replace(/[^A-Za-z0-9]/g, "").slice(0, 2).toUpperCase();
}

/** A source's name for people (a source this panel does not know: its id as it is). */
export function sourceLabel(source: string): string {
  return (SOURCE_LABELS as Record<string, string>)[source] ?? source;
}

/** The tool an imported conversation came from (its label), from `metadata.import.source`; null: not imported. */
export function importedFrom(info: Pick<ConversationInfo, "metadata"> | undefined): string | null {
  const source = importedSource(info);
  return source === null ? null : sourceLabel(source);
}

/** What one source's dry run found for this folder. */
export interface SourceFound {
  source: ImportSource;
  entries: PlannedImport[];
}
/** A source whose dry run was refused (a file too large, unreadable…): said, not hidden. */
export interface SourceFailed {
  source: ImportSource;
  error: string;
}

/**
 * One dry run per source. A tool with nothing for this folder (no data folder, no session of it)
 * answers an empty list and is left out; a refusal is kept with its words.
 */
export async function findSources(
  client: ChatHistoryClient,
  sources: readonly ImportSource[] = IMPORT_SOURCES,
): Promise<{ found: SourceFound[]; failed: SourceFailed[] }> {
  const answers = await Promise.all(
    sources.map((source) =>
      client.importFrom({ source, dryRun: true }).then(
        (answer) => ({ source, entries: answer.conversations }),
        (error: unknown) => ({ source, error: error instanceof Error ? error.message : String(error) }),
      ),
    ),
  );
  return {
    found: answers.filter((a): a is SourceFound => "entries" in a && a.entries.length > 0),
    failed: answers.filter((a): a is SourceFailed => "error" in a),
  };
}

/** The sums a source's entries come to. */
export interface Totals {
  conversations: number;
  messages: number;
  newMessages: number;
  new: number;
  updated: number;
  unchanged: number;
  /** Conversations the import adds rows to (new or updated). */
  importing: number;
  /** Rows retention deletes at the next read, and in how many conversations. */
  expiring: number;
  expiringConversations: number;
}

export function totals(entries: readonly PlannedImport[]): Totals {
  const t: Totals = { conversations: entries.length, messages: 0, newMessages: 0, new: 0, updated: 0, unchanged: 0, importing: 0, expiring: 0, expiringConversations: 0 };
  for (const e of entries) {
    t.messages += e.messages;
    t.newMessages += e.newMessages;
    t[e.status] += 1;
    if (e.newMessages > 0) t.importing += 1;
    if (e.retention !== null && e.retention.droppedMessages > 0) {
      t.expiring += e.retention.droppedMessages;
      t.expiringConversations += 1;
    }
  }
  return t;
}

/** The QuickPick's row of a source: "Claude Code", "2 conversations · 10 messages", "1 new · 1 updated · 0 unchanged". */
export function sourceItem(found: SourceFound): { label: string; description: string; detail: string } {
  const t = totals(found.entries);
  return {
    label: sourceLabel(found.source),
    description: `${plural(t.conversations, "conversation")} · ${plural(t.messages, "message")}`,
    detail: `${t.new} new · ${t.updated} updated · ${t.unchanged} unchanged`,
  };
}

/** The retention settings in force, for the words (the server applies them). */
export interface RetentionSettings {
  maxAgeHours: number;
  maxMessages: number;
  maxTokens: number;
}

const REASON_WORDS = {
  age: (s: RetentionSettings) => `turns older than ${s.maxAgeHours.toLocaleString("en-US")} hours (chatHistory.maxAgeHours)`,
  count: (s: RetentionSettings) => `turns beyond ${s.maxMessages.toLocaleString("en-US")} messages a conversation (chatHistory.maxMessages)`,
  tokens: (s: RetentionSettings) => `turns beyond ${s.maxTokens.toLocaleString("en-US")} tokens a conversation (chatHistory.maxTokens)`,
} as const;

/** Skipped items summed over the entries: "3 thinking (not signed)", most first. */
export function skippedLines(entries: readonly PlannedImport[]): string[] {
  const sums = new Map<string, { what: string; why: string; count: number }>();
  for (const e of entries) {
    for (const s of e.skipped) {
      const key = JSON.stringify([s.what, s.why]);
      const sum = sums.get(key) ?? { what: s.what, why: s.why, count: 0 };
      sum.count += s.count;
      sums.set(key, sum);
    }
  }
  return [...sums.values()].sort((a, b) => b.count - a.count || a.what.localeCompare(b.what)).map((s) => `${s.count.toLocaleString("en-US")} ${s.what} (${s.why})`);
}

/** The conversations listed in the preview (at most `max`, the rest counted). */
function conversationLines(entries: readonly PlannedImport[], max: number): string[] {
  const lines = entries.slice(0, max).map((e) => {
    const what = e.status === "unchanged" ? "already imported" : e.status === "updated" ? `${plural(e.newMessages, "new message")}` : plural(e.messages, "message");
    const gone = e.retention !== null && e.retention.droppedMessages > 0 ? `, ${e.retention.droppedMessages.toLocaleString("en-US")} deleted at the next read` : "";
    return `• ${e.title ?? e.sourceId} — ${what}${gone}`;
  });
  if (entries.length > max) lines.push(`• and ${plural(entries.length - max, "more conversation")}`);
  return lines;
}

/** The preview and its confirmation: the modal's question, its detail, the button, and whether retention loses some of it. */
export interface Preview {
  message: string;
  detail: string;
  /** The confirming button ("Import 2 conversations", "… anyway" when retention deletes some); null: nothing new to import. */
  confirm: string | null;
  /** Rows retention deletes at the next read (0: none). */
  expiring: number;
}

export function previewOf(found: SourceFound, settings: RetentionSettings, maxListed = 12): Preview {
  const label = sourceLabel(found.source);
  const t = totals(found.entries);
  const parts: string[] = [];
  parts.push(`${plural(t.conversations, "conversation")} of this folder, ${plural(t.messages, "message")}: ${t.new} new, ${t.updated} updated, ${t.unchanged} unchanged.`);
  parts.push(conversationLines(found.entries, maxListed).join("\n"));
  const skipped = skippedLines(found.entries);
  if (skipped.length > 0) parts.push(`Not carried over:\n${skipped.map((s) => `• ${s}`).join("\n")}`);
  let expiring = 0;
  if (t.expiring > 0) {
    expiring = t.expiring;
    const reasons = new Set(found.entries.flatMap((e) => e.retention?.reasons ?? []));
    const why = (["age", "count", "tokens"] as const).filter((r) => reasons.has(r)).map((r) => REASON_WORDS[r](settings));
    parts.push(
      `Your retention settings delete ${plural(t.expiring, "message")} of ${plural(t.expiringConversations, "conversation")} ` +
        `at the next read: ${why.join("; ")}. To keep them, raise the setting (0 turns the rule off) before importing.`,
    );
  }
  if (t.importing === 0) {
    return { message: `Nothing new to import from ${label}.`, detail: `${plural(t.conversations, "conversation")} already imported, unchanged since.`, confirm: null, expiring };
  }
  const count = plural(t.importing, "conversation");
  return {
    message: `Import ${count} from ${label}?`,
    detail: parts.join("\n\n"),
    confirm: expiring > 0 ? `Import ${count} anyway` : `Import ${count}`,
    expiring,
  };
}

/** What the import did, in words. */
export function importedText(source: ImportSource, entries: readonly PlannedImport[]): string {
  const t = totals(entries);
  return `Imported ${plural(t.newMessages, "message")} into ${plural(t.importing, "conversation")} from ${sourceLabel(source)}.`;
}

/** Refusals in words, one line per distinct error ("Claude Code, Codex: path: …"); "" when none. */
export function failedText(failed: readonly SourceFailed[]): string {
  const by = new Map<string, string[]>();
  for (const f of failed) by.set(f.error, [...(by.get(f.error) ?? []), sourceLabel(f.source)]);
  return [...by].map(([error, labels]) => `${labels.join(", ")}: ${error}`).join("\n");
}
