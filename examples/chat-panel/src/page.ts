/**
 * The chat webview's page: its HTML under a strict Content-Security-Policy, and the messages the
 * page sends back ({@link FromWebview}; ../webview/main.ts sends them, ./panel receives them).
 */

import { randomBytes } from "node:crypto";
import * as vscode from "vscode";

export type FromWebview =
  | { type: "ready" }
  | { type: "send"; text: string }
  | { type: "stop" }
  /**
   * `seenId`, here and below: the newest stored row on the screen when the person clicked
   * (../rows' SeenRows), what the click acts on; undefined when the page had painted no view.
   */
  | { type: "noticeAction"; action: string; seenId?: number | null }
  | { type: "loadOlder" }
  | { type: "dismiss"; id: number; seenId?: number | null }
  /** `id`: the stored row whose action the person clicked. */
  | { type: "action"; action: string; id: number; seenId?: number | null }
  /** Version 5: `‹ ›` of a row with variants: `id` is the sibling to show. */
  | { type: "switchBranch"; id: number; seenId?: number | null }
  | { type: "openLink"; href: string }
  | { type: "newChat" }
  /** The page could not take the focus itself (after a "focusPrompt" that asked it to confirm). */
  | { type: "focusRefused" }
  | { type: "search"; query: string }
  | { type: "closeSearch" }
  | { type: "openHit"; conversationId: string; id: number }
  | { type: "undoSummary" }
  | { type: "continueHere" }
  | { type: "moveHere" };

function nonce(): string {
  return randomBytes(18).toString("base64url");
}

/** The page: the webview script (dist/webview.js) and the stylesheet (media/panel.css) of the extension at `extensionUri`. */
export function pageHtml(webview: vscode.Webview, extensionUri: vscode.Uri): string {
  const n = nonce();
  const script = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, "dist", "webview.js"));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, "media", "panel.css"));
  // Nothing runs or loads but our own nonce'd script and stylesheet: no inline handlers, no
  // remote or data: images, no frames, no form posts, no network from the page.
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${n}'`,
    `style-src ${webview.cspSource}`,
    `img-src ${webview.cspSource}`,
    `font-src ${webview.cspSource}`,
    "connect-src 'none'",
    "form-action 'none'",
    "frame-src 'none'",
    "base-uri 'none'",
  ].join("; ");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Chat</title>
</head>
<body>
<header id="header">
  <div id="title-row"><div id="title"></div><span id="source" hidden></span><form id="search-form" role="search"><input id="search" type="search" placeholder="Search all conversations" aria-label="Search conversations"></form></div>
  <div id="meter" hidden><div id="meter-bar"><div id="meter-fill"></div></div><span id="meter-label"></span><span id="meter-detail"></span></div>
</header>
<div id="search-results" hidden></div>
<div id="summary" hidden><span id="summary-text"></span><button id="undo-summary" type="button">Undo</button></div>
<div id="elsewhere" hidden><span id="elsewhere-text"></span><span id="elsewhere-actions"><button id="continue-here" type="button">Continue in this workspace</button><button id="move-here" type="button">Move that workspace's history here…</button></span></div>
<div id="notices" role="status" aria-live="polite"></div>
<main id="messages" aria-live="polite"></main>
<form id="composer">
  <textarea id="prompt" rows="3" placeholder="Ask about your workspace… (Enter to send, Shift+Enter for a new line)" aria-label="Prompt"></textarea>
  <div id="composer-bar"><span id="status"></span><button id="stop" type="button" hidden>Stop</button><button id="send" type="submit">Send</button></div>
</form>
<script nonce="${n}" src="${script}"></script>
</body>
</html>`;
}
