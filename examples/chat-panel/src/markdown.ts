/**
 * A small Markdown subset parsed into a tree of plain data, never into HTML.
 *
 * The webview builds DOM nodes from this tree with `createElement` and `textContent` only, so
 * text from a model or a user can never become markup: `<img onerror=…>` stays the characters
 * it is. Links keep their target only when it is `http:`, `https:` or `mailto:`; any other
 * scheme (`javascript:`, `data:`, `vbscript:`, `file:`, `command:`…) leaves the link inert
 * (`href: null`, shown as text). No `vscode` or DOM import: unit-tested under node:test.
 *
 * Supported: paragraphs, `#` headings, fenced code blocks, `-`/`*`/`1.` lists, `>` quotes,
 * inline code, `**bold**`, `*italic*`/`_italic_`, `[text](url)`, and `![alt](url)` shown as a
 * link (images are never loaded from a message).
 */

export type Inline =
  | { t: "text"; s: string }
  | { t: "code"; s: string }
  | { t: "strong"; c: Inline[] }
  | { t: "em"; c: Inline[] }
  | { t: "link"; href: string | null; c: Inline[] };

export type Block =
  | { t: "p"; c: Inline[] }
  | { t: "h"; level: number; c: Inline[] }
  | { t: "pre"; lang: string; s: string }
  | { t: "list"; ordered: boolean; items: Inline[][] }
  | { t: "quote"; c: Block[] };

const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

/** The link target to keep, or null when it must be inert. Relative or scheme-less URLs are inert too. */
export function safeHref(raw: string): string | null {
  // Browsers ignore ASCII control characters and whitespace inside a scheme ("java\tscript:"),
  // so judge the URL the way the browser would parse it.
  const url = raw.trim();
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(parsed.protocol) ? parsed.href : null;
}

export function parseMarkdown(source: string): Block[] {
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  const blocks: Block[] = [];
  let i = 0;
  let para: string[] = [];
  const flush = () => {
    if (para.length > 0) blocks.push({ t: "p", c: parseInline(para.join("\n")) });
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      const marker = fence[1];
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(marker)) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      blocks.push({ t: "pre", lang: fence[2], s: body.join("\n") });
      continue;
    }
    const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      flush();
      blocks.push({ t: "h", level: heading[1].length, c: parseInline(heading[2]) });
      i++;
      continue;
    }
    const item = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const items: Inline[][] = [];
      while (i < lines.length) {
        const next = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(lines[i]);
        if (!next || /\d/.test(next[1]) !== ordered) break;
        const text = [next[2]];
        i++;
        // Indented continuation lines belong to the item.
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !/^\s*([-*+]|\d{1,9}[.)])\s+/.test(lines[i])) {
          text.push(lines[i++].trim());
        }
        items.push(parseInline(text.join("\n")));
      }
      blocks.push({ t: "list", ordered, items });
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      flush();
      const quoted: string[] = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s{0,3}>\s?/, ""));
      blocks.push({ t: "quote", c: parseMarkdown(quoted.join("\n")) });
      continue;
    }
    if (line.trim() === "") {
      flush();
      i++;
      continue;
    }
    para.push(line);
    i++;
  }
  flush();
  return blocks;
}

export function parseInline(text: string): Inline[] {
  const out: Inline[] = [];
  let plain = "";
  const push = (node: Inline) => {
    if (plain !== "") out.push({ t: "text", s: plain });
    plain = "";
    out.push(node);
  };
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch === "\\" && i + 1 < text.length && /[\\`*_[\]()#!>-]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (ch === "`") {
      let ticks = 1;
      while (text[i + ticks] === "`") ticks++;
      const fence = "`".repeat(ticks);
      const end = text.indexOf(fence, i + ticks);
      if (end > 0) {
        push({ t: "code", s: text.slice(i + ticks, end).replace(/^ (.*) $/s, "$1") });
        i = end + ticks;
        continue;
      }
      plain += fence;
      i += ticks;
      continue;
    }
    if (ch === "*" || ch === "_") {
      const run = text[i + 1] === ch ? 2 : 1;
      const end = canOpen(text, i, run) ? findCloser(text, i + run, ch.repeat(run)) : -1;
      if (end > 0) {
        const inner = parseInline(text.slice(i + run, end));
        push(run === 2 ? { t: "strong", c: inner } : { t: "em", c: inner });
        i = end + run;
        continue;
      }
      plain += ch.repeat(run);
      i += run;
      continue;
    }
    if (ch === "[" || (ch === "!" && text[i + 1] === "[")) {
      const open = ch === "!" ? i + 1 : i;
      const link = matchLink(text, open);
      if (link) {
        const label = ch === "!" ? [{ t: "text", s: link.label || link.url } as Inline] : parseInline(link.label);
        push({ t: "link", href: safeHref(link.url), c: label });
        i = link.end;
        continue;
      }
    }
    plain += ch;
    i++;
  }
  if (plain !== "") out.push({ t: "text", s: plain });
  return out;
}

const WORD = /[\p{L}\p{N}]/u;

/** A `*`/`_` run at `i` opens emphasis: followed by non-space; `_` also not inside a word. */
function canOpen(text: string, i: number, run: number): boolean {
  const next = text[i + run] ?? "";
  if (next === "" || /\s/.test(next)) return false;
  return text[i] !== "_" || !WORD.test(text[i - 1] ?? "");
}

/** The closing run for `marker` from `from`: preceded by non-space; `_` also not followed by a word character. */
function findCloser(text: string, from: number, marker: string): number {
  for (let j = text.indexOf(marker, from); j > from; j = text.indexOf(marker, j + 1)) {
    if (/\s/.test(text[j - 1])) continue;
    if (marker.length === 1 && text[j + 1] === marker) {
      j++; // part of a longer run: not this one
      continue;
    }
    if (marker[0] === "_" && WORD.test(text[j + marker.length] ?? "")) continue;
    return j;
  }
  return -1;
}

/** `[label](url "title")` starting at `open` (the `[`): label, url and the index after `)`. */
function matchLink(text: string, open: number): { label: string; url: string; end: number } | null {
  let depth = 0;
  let close = -1;
  for (let j = open; j < text.length; j++) {
    if (text[j] === "\\") {
      j++;
      continue;
    }
    if (text[j] === "[") depth++;
    else if (text[j] === "]" && --depth === 0) {
      close = j;
      break;
    }
  }
  if (close < 0 || text[close + 1] !== "(") return null;
  let parens = 0;
  for (let j = close + 2; j < text.length; j++) {
    if (text[j] === "(") parens++;
    else if (text[j] === ")") {
      if (parens === 0) {
        const target = text.slice(close + 2, j).trim();
        const url = target.replace(/\s+(".*"|'.*')$/s, "").replace(/^<(.*)>$/s, "$1");
        return { label: text.slice(open + 1, close), url, end: j + 1 };
      }
      parens--;
    }
  }
  return null;
}

/** The plain text of inline nodes (for copy, titles and tests). */
export function inlineText(nodes: Inline[]): string {
  return nodes.map((n) => (n.t === "text" || n.t === "code" ? n.s : inlineText(n.c))).join("");
}
