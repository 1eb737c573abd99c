/** `chatHistory/search` through ChatHistoryClient against the real server (protocol.md "Version 2" → Search). */

import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidParamsError } from "../src/client";
import { codePointSpanToUtf16 } from "../src/types";
import { startServer } from "./helpers";

test("search finds rows case- and accent-insensitively, with snippets and code-point highlights", async (t) => {
  const { client } = await startServer(t, { workspace: "file:///ws-main" });
  const stored = await client.append({
    conversationId: "c1",
    messages: [
      { role: "user", content: "😀 Le CAFÉ de Paris" },
      { role: "assistant", content: "A café near the station" },
    ],
  });
  await client.append({ conversationId: "c2", messages: [{ role: "user", content: "tea only" }] });
  await client.append({
    conversationId: "c3",
    workspace: "file:///ws-other",
    messages: [{ role: "user", content: "cafe elsewhere" }],
  });

  const found = await client.search({ query: "cafe" });
  assert.equal(found.hasMore, false);
  assert.deepEqual(found.results.map((r) => r.id).sort((a, b) => a - b), stored.messages.map((m) => m.id));
  for (const result of found.results) {
    assert.deepEqual(Object.keys(result).sort(), ["conversationId", "highlights", "id", "onActivePath", "role", "snippet", "timestamp", "turn", "workspace"]);
    assert.equal(result.workspace, "file:///ws-main");
    assert.equal(result.conversationId, "c1");
    const [start, end] = codePointSpanToUtf16(result.snippet, result.highlights[0]!);
    assert.equal(result.snippet.slice(start, end).toLowerCase(), "café", "the highlight marks the matched word");
  }
  const emoji = found.results.find((r) => r.snippet.startsWith("😀"))!;
  assert.deepEqual(emoji.highlights, [[5, 9]], "offsets count code points: the emoji is one");

  const everywhere = await client.search({ query: "cafe", allWorkspaces: true, limit: 2 });
  assert.equal(everywhere.results.length, 2);
  assert.equal(everywhere.hasMore, true);
  const users = await client.search({ query: "cafe", roles: ["user"], allWorkspaces: true });
  assert.deepEqual(users.results.map((r) => r.conversationId).sort(), ["c1", "c3"]);
});

test("search refuses bad params naming the field, and reads query text as data", async (t) => {
  const { client } = await startServer(t);
  await client.append({ conversationId: "c", messages: [{ role: "user", content: 'say "NEAR(a b)" AND *' }] });
  const cases: { params: any; field: string }[] = [
    { params: { query: "" }, field: "query" },
    { params: { query: "x", limit: 0 }, field: "limit" },
    { params: { query: "x", limit: 201 }, field: "limit" },
    { params: { query: "x", roles: ["user", "robot"] }, field: "roles[1]" },
  ];
  for (const { params, field } of cases) {
    await assert.rejects(client.search(params), (error: unknown) => {
      assert.ok(error instanceof InvalidParamsError, `got ${String(error)}`);
      assert.equal(error.field, field);
      return true;
    });
  }
  for (const query of ['"NEAR(a b)"', "AND *", '"', "NEAR("]) {
    const answer = await client.search({ query });
    assert.ok(Array.isArray(answer.results));
  }
  assert.equal((await client.search({ query: '"near(a b)" and' })).results.length, 1);
});

test("codePointSpanToUtf16 maps code point offsets to UTF-16 offsets", () => {
  assert.deepEqual(codePointSpanToUtf16("a😀bc", [2, 4]), [3, 5]);
  assert.deepEqual(codePointSpanToUtf16("a😀bc", [1, 2]), [1, 3]);
  assert.deepEqual(codePointSpanToUtf16("abc", [0, 3]), [0, 3]);
});
