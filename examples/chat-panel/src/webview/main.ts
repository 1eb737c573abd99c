/**
 * The chat webview: draws the PanelView the extension posts and sends the person's actions
 * back. It never assigns HTML: every text from a model, a user or a tool becomes DOM text nodes
 * (Markdown through ../markdown's tree, links only when their scheme is safe).
 */

import { parseMarkdown, type Block, type Inline } from "../markdown";
import { SeenRows } from "../rows";
import type { SearchView } from "../state";
import type { MessageView, PanelView } from "../view";

interface VsCodeApi {
  postMessage(message: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;
const vscode = acquireVsCodeApi();

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const messagesEl = $<HTMLElement>("messages");
const noticesEl = $<HTMLElement>("notices");
const promptEl = $<HTMLTextAreaElement>("prompt");
const sendEl = $<HTMLButtonElement>("send");
const stopEl = $<HTMLButtonElement>("stop");
const statusEl = $<HTMLElement>("status");
const PROMPT_PLACEHOLDER = promptEl.placeholder;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderInline(nodes: Inline[], parent: HTMLElement): void {
  for (const node of nodes) {
    switch (node.t) {
      case "text":
        parent.append(document.createTextNode(node.s));
        break;
      case "code":
        parent.append(el("code", undefined, node.s));
        break;
      case "strong":
        renderInline(node.c, parent.appendChild(el("strong")));
        break;
      case "em":
        renderInline(node.c, parent.appendChild(el("em")));
        break;
      case "link": {
        if (node.href === null) {
          // An unsafe or relative target: the label as plain text, marked, not clickable.
          const span = el("span", "inert-link");
          span.title = "link removed: only http, https and mailto links are followed";
          renderInline(node.c, span);
          parent.append(span);
        } else {
          const a = el("a");
          a.href = node.href;
          a.dataset.href = node.href;
          a.rel = "noopener noreferrer";
          renderInline(node.c, a);
          parent.append(a);
        }
        break;
      }
    }
  }
}

function renderBlocks(blocks: Block[], parent: HTMLElement): void {
  for (const block of blocks) {
    switch (block.t) {
      case "p":
        renderInline(block.c, parent.appendChild(el("p")));
        break;
      case "h":
        renderInline(block.c, parent.appendChild(el(`h${Math.min(6, block.level + 2)}` as "h3")));
        break;
      case "pre": {
        const pre = parent.appendChild(el("pre"));
        pre.append(el("code", block.lang ? `lang-${block.lang.replace(/[^\w-]/g, "")}` : undefined, block.s));
        break;
      }
      case "list": {
        const list = parent.appendChild(el(block.ordered ? "ol" : "ul"));
        for (const item of block.items) renderInline(item, list.appendChild(el("li")));
        break;
      }
      case "quote":
        renderBlocks(block.c, parent.appendChild(el("blockquote")));
        break;
    }
  }
}

// Labels of state.NoticeAction: Retry / Keep partial reply of a reply not stored; Continue /
// Retry / Keep of a cut reply stored as interrupted (version 4).
const NOTICE_ACTION_LABELS: Record<string, string> = {
  retry: "Retry",
  keep: "Keep partial reply",
  continue: "Continue",
  retryCut: "Retry",
  keepCut: "Keep",
};

// Labels of view.MESSAGE_ACTIONS (kept here so the webview bundle does not import the shim).
const ACTION_LABELS: Record<string, string> = {
  copy: "Copy",
  edit: "Edit",
  regenerate: "Regenerate",
  fork: "Fork",
  redact: "Redact",
  deleteExchange: "Delete",
};

const ROLE_NAMES: Record<string, string> = { user: "You", assistant: "Assistant", system: "System", tool: "Tool" };

/** A prompt longer than this shows collapsed, with "Show more". */
const LONG_CHARS = 1_200;
const LONG_LINES = 16;
/** Keys of long prompts the person expanded (kept across redraws). */
const expanded = new Set<string>();

function plural(n: number, word: string): string {
  return `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;
}

function renderPlain(message: MessageView, body: HTMLElement): void {
  const text = message.content;
  const lines = text.split("\n").length;
  const long = message.role === "user" && (text.length > LONG_CHARS || lines > LONG_LINES);
  if (!long) {
    body.append(el("div", "plain", text));
    return;
  }
  const open = expanded.has(message.key);
  const cut = text.split("\n").slice(0, LONG_LINES).join("\n").slice(0, LONG_CHARS);
  const plain = body.appendChild(el("div", "plain collapsible", open ? text : `${cut}…`));
  plain.dataset.full = String(open);
  const toggle = body.appendChild(el("button", "show-more", open ? "Show less" : `Show more (${plural(text.length, "character")})`));
  toggle.type = "button";
  toggle.dataset.toggle = message.key;
}

function renderMessage(message: MessageView): HTMLElement {
  const classes = `msg role-${message.role}${message.streaming ? " streaming" : ""}${message.interrupted ? " interrupted" : ""}${message.failed ? " failed" : ""}`;
  const article = el("article", classes);
  article.dataset.key = message.key;
  if (message.id !== null) article.dataset.id = String(message.id);
  const role = el("div", "role", ROLE_NAMES[message.role] ?? message.role);
  if (message.branch === null || message.branch === undefined) article.append(role);
  else {
    // Version 5: the row's variants. The arrows are buttons (Tab reaches them); on a focused
    // message Alt+Left / Alt+Right press them.
    const branch = message.branch;
    const head = article.appendChild(el("div", "head"));
    head.append(role);
    const group = head.appendChild(el("span", "branch"));
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", `Variant ${branch.index} of ${branch.count}`);
    const arrow = (which: "prev" | "next", target: number | null) => {
      const button = el("button", `branch-${which}`, which === "prev" ? "‹" : "›");
      button.type = "button";
      button.dataset.branch = which;
      button.title = which === "prev" ? "Previous variant (Alt+Left)" : "Next variant (Alt+Right)";
      button.setAttribute("aria-label", which === "prev" ? "Previous variant" : "Next variant");
      if (target === null) button.disabled = true;
      else button.dataset.target = String(target);
      return button;
    };
    group.append(arrow("prev", branch.prev), el("span", "branch-count", `${branch.index}/${branch.count}`), arrow("next", branch.next));
    article.tabIndex = 0;
    article.setAttribute("aria-keyshortcuts", "Alt+ArrowLeft Alt+ArrowRight");
  }
  const body = article.appendChild(el("div", "body"));
  if (message.role === "assistant") renderBlocks(parseMarkdown(message.content), body);
  else renderPlain(message, body);
  if (message.interrupted) {
    const words = message.saved
      ? "Interrupted: saved as far as it got (Continue, Retry or Keep in the notice above)"
      : "Interrupted: not stored (Keep or Retry in the notice above)";
    article.append(el("div", "mark", words));
  }
  if (message.failed) article.append(el("div", "mark", "No reply stored for this prompt (Retry in the notice above)"));
  for (const call of message.toolCalls) {
    const details = article.appendChild(el("details", "tool-call"));
    const summary = details.appendChild(el("summary"));
    summary.append(el("span", "tool-name", call.name), el("span", "tool-state", call.result === null ? " (running…)" : " ✓"));
    details.append(el("div", "label", "Arguments"), el("pre", "tool-args", call.arguments));
    details.append(el("div", "label", "Result"), el("pre", "tool-result", call.result ?? "(no result yet)"));
  }
  if (message.actions.length > 0) {
    const bar = article.appendChild(el("div", "actions"));
    for (const action of message.actions) {
      const button = bar.appendChild(el("button", "action", ACTION_LABELS[action] ?? action));
      button.type = "button";
      button.dataset.action = action;
    }
  }
  return article;
}

const rendered = new Map<string, { sig: string; node: HTMLElement }>();
let current: PanelView | null = null;
let drawnSearch: SearchView | null = null;
let focused: string | null = null;

function drawSearch(search: SearchView | null): void {
  if (search === drawnSearch) return;
  drawnSearch = search;
  const box = $("search-results");
  box.hidden = search === null;
  if (search === null) return box.replaceChildren();
  const count = `${search.hits.length}${search.hasMore ? "+" : ""} ${search.hits.length === 1 && !search.hasMore ? "message matches" : "messages match"}`;
  const head = el("div", "search-head", search.hits.length === 0 ? `No messages match “${search.query}”.` : `${count} “${search.query}”`);
  const close = head.appendChild(el("button", "dismiss", "×"));
  close.type = "button";
  close.title = "Close search";
  close.dataset.closeSearch = "1";
  const items = search.hits.map((hit) => {
    const item = el("button", "hit");
    item.type = "button";
    item.dataset.conversation = hit.conversationId;
    item.dataset.id = String(hit.id);
    item.append(el("span", "hit-title", hit.title), el("span", "hit-role", ROLE_NAMES[hit.role] ?? hit.role));
    const snippet = item.appendChild(el("span", "hit-snippet"));
    for (const part of hit.parts) snippet.append(part.hit ? el("mark", undefined, part.text) : document.createTextNode(part.text));
    return item;
  });
  box.replaceChildren(head, ...items);
}
let olderPending = false;
/** What the screen has shown: a click on a message or a notice carries it (`seenId`). */
const seen = new SeenRows();

function draw(view: PanelView): void {
  const switched = current?.conversationId !== view.conversationId;
  const started = view.busy && !(current?.busy ?? false);
  current = view;
  // Seen once a frame after it was painted: the next animation frame runs before this view's
  // first paint, the one after it once that paint is done.
  requestAnimationFrame(() => requestAnimationFrame(() => seen.painted(view.lastId)));
  // Where the list was scrolled, measured before anything above it changes size.
  const nearBottom = messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 60;
  const fromBottom = messagesEl.scrollHeight - messagesEl.scrollTop;
  $("title").textContent = view.title;
  document.title = view.title;
  const source = $("source");
  source.hidden = view.source === null;
  source.textContent = view.source ?? "";

  const meter = $("meter");
  meter.hidden = view.meter === null;
  if (view.meter) {
    $("meter-label").textContent = view.meter.label;
    $("meter-detail").textContent = view.meter.detail;
    const fill = $("meter-fill");
    fill.style.width = `${Math.round((view.meter.fraction ?? 0) * 100)}%`;
    fill.classList.toggle("high", (view.meter.fraction ?? 0) > 0.8);
  }

  drawSearch(view.search ?? null);
  const summary = $("summary");
  summary.hidden = view.summary === null && !view.compacting;
  summary.dataset.compacting = String(view.compacting);
  $("summary-text").textContent = view.summary ?? (view.compacting ? "Summarizing earlier turns in the background…" : "");
  $<HTMLButtonElement>("undo-summary").hidden = view.summary === null;
  // A chat of another workspace: read-only here, with what can be done about it.
  const elsewhere = view.elsewhere ?? null;
  $("elsewhere").hidden = elsewhere === null;
  $("elsewhere-text").textContent = elsewhere ?? "";
  promptEl.disabled = elsewhere !== null;
  promptEl.placeholder = elsewhere !== null ? "Read only: this chat belongs to another workspace." : PROMPT_PLACEHOLDER;

  noticesEl.replaceChildren(
    ...view.notices.map((notice) => {
      const div = el("div", `notice notice-${notice.kind}`);
      div.append(el("span", "notice-text", notice.text));
      for (const action of notice.actions ?? []) {
        const button = div.appendChild(el("button", "notice-action", NOTICE_ACTION_LABELS[action] ?? action));
        button.type = "button";
        button.dataset.noticeAction = action;
      }
      const close = div.appendChild(el("button", "dismiss", "×"));
      close.type = "button";
      close.title = "Dismiss";
      close.dataset.notice = String(notice.id);
      return div;
    }),
  );

  const oldFirst = messagesEl.firstElementChild as HTMLElement | null;
  if (switched) rendered.clear();
  const keep = new Set<string>();
  const nodes: HTMLElement[] = [];
  if (view.hasMore) nodes.push(el("div", "older", view.loadingOlder ? "Loading older messages…" : "Scroll up for older messages"));
  for (const message of view.messages) {
    const sig = JSON.stringify(message);
    let entry = rendered.get(message.key);
    if (entry === undefined || entry.sig !== sig) {
      entry = { sig, node: renderMessage(message) };
      rendered.set(message.key, entry);
    }
    keep.add(message.key);
    nodes.push(entry.node);
  }
  for (const key of [...rendered.keys()]) if (!keep.has(key)) rendered.delete(key);
  if (view.messages.length === 0) nodes.push(el("div", "empty", "Ask something about your workspace. The assistant can read its files."));
  messagesEl.replaceChildren(...nodes);

  const prepended = oldFirst !== null && messagesEl.firstElementChild !== oldFirst && !switched;
  // Follow the conversation while the person is at its end, and always after they send.
  const focusKey = view.focusId === null ? null : `${view.conversationId}:${view.focusId}`;
  const focusNode = view.focusId === null ? null : messagesEl.querySelector<HTMLElement>(`article[data-id="${view.focusId}"]`);
  if (focusNode && focusKey !== focused) {
    // A search hit was opened: show that message, marked.
    focused = focusKey;
    messagesEl.querySelectorAll(".focus").forEach((n) => n.classList.remove("focus"));
    focusNode.classList.add("focus");
    focusNode.scrollIntoView({ block: "center" });
  } else if (switched || nearBottom || started) messagesEl.scrollTop = messagesEl.scrollHeight;
  else if (prepended) messagesEl.scrollTop = messagesEl.scrollHeight - fromBottom;
  olderPending = view.loadingOlder;

  if (refocus !== null) {
    const row = messagesEl.querySelector<HTMLElement>(`article[data-id="${refocus.id}"]`);
    if (row) {
      const arrow = refocus.which === null ? null : row.querySelector<HTMLButtonElement>(`button[data-branch="${refocus.which}"]:not(:disabled)`);
      (arrow ?? row).focus();
      refocus = null;
    }
  }
  sendEl.disabled = view.busy || elsewhere !== null;
  stopEl.hidden = !view.busy;
  statusEl.textContent = view.busy ? "Thinking…" : "";
  document.body.classList.toggle("busy", view.busy);
}

window.addEventListener("message", (event: MessageEvent) => {
  const data = event.data as { type?: string; view?: PanelView };
  if (data?.type === "view" && data.view) draw(data.view);
  if (data?.type === "focusPrompt") {
    promptEl.focus();
    // Shown without VS Code's focus (New Chat on an open panel): the page must have taken it.
    if ((data as { confirm?: boolean }).confirm) setTimeout(() => document.hasFocus() || vscode.postMessage({ type: "focusRefused" }), 50);
  }
});

// The prompt box is where the keyboard lands in this panel. The workbench focuses the webview
// (New Chat, a conversation opened from the list) before the extension's "focusPrompt" can
// arrive, and it focuses the page's body when the window comes back: in both cases nothing of
// ours has the focus, so the prompt box takes it, and a character typed at the body in that
// moment is redirected into it (focus moved in keydown receives the key's text).
const nothingFocused = () => document.activeElement === null || document.activeElement === document.body;
window.addEventListener("focus", () => {
  if (nothingFocused()) promptEl.focus();
});
document.addEventListener(
  "keydown",
  (event) => {
    if (nothingFocused() && !promptEl.disabled && event.key.length === 1 && !event.ctrlKey && !event.metaKey && !event.altKey) promptEl.focus();
  },
  true,
);
if (document.hasFocus() && nothingFocused()) promptEl.focus();
stopEl.addEventListener("click", () => vscode.postMessage({ type: "stop" }));

function send(): void {
  const text = promptEl.value;
  if (text.trim() === "" || current?.busy || current?.elsewhere) return;
  vscode.postMessage({ type: "send", text });
  promptEl.value = "";
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
promptEl.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});

$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const query = $<HTMLInputElement>("search").value;
  vscode.postMessage(query.trim() === "" ? { type: "closeSearch" } : { type: "search", query });
});
$("undo-summary").addEventListener("click", () => vscode.postMessage({ type: "undoSummary" }));
$("continue-here").addEventListener("click", () => vscode.postMessage({ type: "continueHere" }));
$("move-here").addEventListener("click", () => vscode.postMessage({ type: "moveHere" }));

messagesEl.addEventListener("scroll", () => {
  if (messagesEl.scrollTop < 40 && current?.hasMore && !olderPending) {
    olderPending = true;
    vscode.postMessage({ type: "loadOlder" });
  }
});

// The rows on the screen when a button is pressed are the ones its click acts on.
document.addEventListener("pointerdown", () => seen.pressed(), true);

document.addEventListener("click", (event) => {
  const target = event.target as HTMLElement;
  // A pointer's click has a click count (`detail`); Enter or Space on a focused button has none.
  const seenId = () => seen.clicked(event.detail > 0);
  const link = target.closest("a");
  if (link) {
    event.preventDefault();
    if (link.dataset.href) vscode.postMessage({ type: "openLink", href: link.dataset.href });
    return;
  }
  const action = target.closest<HTMLElement>("button[data-action]");
  if (action) {
    // The row the person clicked, and the newest row they saw: a rewind from it must not delete a
    // row drawn after it.
    const id = Number(action.closest<HTMLElement>("article")?.dataset.id);
    if (Number.isSafeInteger(id)) vscode.postMessage({ type: "action", action: action.dataset.action, id, seenId: seenId() });
    return;
  }
  const branch = target.closest<HTMLButtonElement>("button[data-branch]");
  if (branch) {
    switchBranch(branch, seenId());
    return;
  }
  const toggle = target.closest<HTMLElement>("button[data-toggle]");
  if (toggle) {
    const key = toggle.dataset.toggle!;
    if (expanded.has(key)) expanded.delete(key);
    else expanded.add(key);
    rendered.delete(key);
    if (current) draw(current);
    return;
  }
  const noticeAction = target.closest<HTMLElement>("button[data-notice-action]");
  if (noticeAction) {
    // A cut reply's offer is for the newest row seen: Continue, Retry or Keep act on that row only.
    vscode.postMessage({ type: "noticeAction", action: noticeAction.dataset.noticeAction, seenId: seenId() });
    return;
  }
  const hit = target.closest<HTMLElement>("button.hit");
  if (hit) {
    $<HTMLInputElement>("search").value = "";
    vscode.postMessage({ type: "openHit", conversationId: hit.dataset.conversation, id: Number(hit.dataset.id) });
    return;
  }
  if (target.closest("button[data-close-search]")) {
    $<HTMLInputElement>("search").value = "";
    vscode.postMessage({ type: "closeSearch" });
    return;
  }
  const dismiss = target.closest<HTMLElement>("button[data-notice]");
  if (dismiss) vscode.postMessage({ type: "dismiss", id: Number(dismiss.dataset.notice), seenId: seenId() });
});

/**
 * Version 5: a variant arrow pressed (by pointer, Enter/Space, or Alt+Left/Right on its
 * message): the extension switches branch (with what the screen showed, `seenId`). The keyboard
 * stays where it was: once the new branch is drawn, the same arrow of the row shown there (or
 * the row itself) takes the focus again.
 */
function switchBranch(button: HTMLButtonElement, seenId: number | null | undefined): void {
  const id = Number(button.dataset.target);
  if (button.disabled || !Number.isSafeInteger(id)) return;
  const keyboard = document.activeElement !== null && button.closest("article")?.contains(document.activeElement);
  refocus = keyboard ? { id, which: document.activeElement === button ? (button.dataset.branch ?? null) : null } : null;
  vscode.postMessage({ type: "switchBranch", id, seenId });
}

/** The row (and its arrow) to focus once drawn, after a switch made from the keyboard. */
let refocus: { id: number; which: string | null } | null = null;

document.addEventListener(
  "keydown",
  (event) => {
    if (!event.altKey || event.ctrlKey || event.metaKey || (event.key !== "ArrowLeft" && event.key !== "ArrowRight")) return;
    const article = (document.activeElement as HTMLElement | null)?.closest<HTMLElement>("article.msg");
    const button = article?.querySelector<HTMLButtonElement>(`button[data-branch="${event.key === "ArrowLeft" ? "prev" : "next"}"]`);
    if (!article || !button) return;
    // Not the workbench's (or the browser's) Back/Forward: the message's variants.
    event.preventDefault();
    event.stopPropagation();
    if (!button.disabled) switchBranch(button, seen.clicked(false));
  },
  true,
);

vscode.postMessage({ type: "ready" });
