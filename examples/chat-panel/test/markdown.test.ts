import assert from "node:assert/strict";
import { test } from "node:test";
import { inlineText, parseInline, parseMarkdown, safeHref, type Block, type Inline } from "../src/markdown";

function links(nodes: Inline[]): { href: string | null; text: string }[] {
  return nodes.flatMap((n) =>
    n.t === "link" ? [{ href: n.href, text: inlineText(n.c) }] : n.t === "strong" || n.t === "em" ? links(n.c) : [],
  );
}

test("raw HTML stays text: the tree has no node that could carry markup", () => {
  const blocks = parseMarkdown('Hi <img src=x onerror="alert(1)"> <script>alert(2)</script>');
  assert.deepEqual(blocks, [{ t: "p", c: [{ t: "text", s: 'Hi <img src=x onerror="alert(1)"> <script>alert(2)</script>' }] }]);
});

test("only http, https and mailto links keep a target", () => {
  assert.equal(safeHref("https://example.com/a?b=1"), "https://example.com/a?b=1");
  assert.equal(safeHref("http://localhost:8080/"), "http://localhost:8080/");
  assert.equal(safeHref("mailto:me@example.com"), "mailto:me@example.com");
  for (const bad of [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "java\nscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox",
    "file:///etc/passwd",
    "command:workbench.action.terminal.new",
    "vscode://ms-python.python",
    "/relative/path",
    "#anchor",
    "",
  ]) {
    assert.equal(safeHref(bad), null, JSON.stringify(bad));
  }
});

test("links: the label is kept, an unsafe target becomes null (inert)", () => {
  const nodes = parseInline("see [the docs](https://example.com/docs) or [click me](javascript:alert(1)) or ![pic](https://x/y.png)");
  assert.deepEqual(links(nodes), [
    { href: "https://example.com/docs", text: "the docs" },
    { href: null, text: "click me" },
    { href: "https://x/y.png", text: "pic" },
  ]);
  assert.equal(inlineText(nodes), "see the docs or click me or pic");
});

test("a link with parentheses in its target and a title", () => {
  const nodes = parseInline('[wiki](https://en.wikipedia.org/wiki/Foo_(bar) "Title")');
  assert.deepEqual(links(nodes), [{ href: "https://en.wikipedia.org/wiki/Foo_(bar)", text: "wiki" }]);
});

test("inline code, strong and emphasis; snake_case is not emphasis", () => {
  assert.deepEqual(parseInline("a `x<y>` **b** *c* read_file_now"), [
    { t: "text", s: "a " },
    { t: "code", s: "x<y>" },
    { t: "text", s: " " },
    { t: "strong", c: [{ t: "text", s: "b" }] },
    { t: "text", s: " " },
    { t: "em", c: [{ t: "text", s: "c" }] },
    { t: "text", s: " read_file_now" },
  ]);
  assert.deepEqual(parseInline("2 * 3 * 4"), [{ t: "text", s: "2 * 3 * 4" }]);
  assert.deepEqual(parseInline("\\*not\\*"), [{ t: "text", s: "*not*" }]);
});

test("blocks: headings, fenced code (kept verbatim), lists, quotes, paragraphs", () => {
  const source = "# Title\n\nSome text\nsecond line\n\n```ts\nconst a = '<b>';\n```\n- one\n- two\n1. first\n> quoted";
  const blocks: Block[] = parseMarkdown(source);
  assert.deepEqual(
    blocks.map((b) => b.t),
    ["h", "p", "pre", "list", "list", "quote"],
  );
  assert.deepEqual(blocks[2], { t: "pre", lang: "ts", s: "const a = '<b>';" });
  assert.equal((blocks[3] as { ordered: boolean }).ordered, false);
  assert.equal((blocks[4] as { ordered: boolean }).ordered, true);
  assert.equal(inlineText((blocks[1] as { c: Inline[] }).c), "Some text\nsecond line");
});

test("an unclosed fence runs to the end; unclosed markers stay text", () => {
  assert.deepEqual(parseMarkdown("```\ncode"), [{ t: "pre", lang: "", s: "code" }]);
  assert.deepEqual(parseInline("**open and `tick"), [{ t: "text", s: "**open and `tick" }]);
  assert.deepEqual(parseInline("[label](no close"), [{ t: "text", s: "[label](no close" }]);
});

test("underscores inside words and identifiers are not emphasis; the link after them still parses", () => {
  const nodes = parseInline('x <img onerror="window.__pwned=1"> and [click me](javascript:window.__pwned=2) and foo__bar__baz');
  assert.deepEqual(links(nodes), [{ href: null, text: "click me" }]);
  assert.ok(nodes.every((n) => n.t !== "strong" && n.t !== "em"), JSON.stringify(nodes));
  assert.equal(inlineText(nodes), 'x <img onerror="window.__pwned=1"> and click me and foo__bar__baz');
  assert.deepEqual(parseInline("**a** and __b__ and *c d*"), [
    { t: "strong", c: [{ t: "text", s: "a" }] },
    { t: "text", s: " and " },
    { t: "strong", c: [{ t: "text", s: "b" }] },
    { t: "text", s: " and " },
    { t: "em", c: [{ t: "text", s: "c d" }] },
  ]);
});
