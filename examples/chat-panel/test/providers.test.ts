import assert from "node:assert/strict";
import { test } from "node:test";
import {
  buildRequest,
  errorBody,
  errorMessage,
  isContextLengthError,
  mayRefuseProviderState,
  parseStream,
  type ModelEvent,
  type ModelKind,
} from "../src/providers";
import { READ_FILE_TOOL } from "../src/tools";

/** The wire text cut into small chunks at arbitrary places, as a network delivers it. */
async function* chunked(text: string, size = 7): AsyncGenerator<string> {
  for (let i = 0; i < text.length; i += size) yield text.slice(i, i + size);
}

async function events(kind: ModelKind, wire: string): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const e of parseStream(kind, chunked(wire))) out.push(e);
  return out;
}

const text = (es: ModelEvent[]) => es.map((e) => (e.type === "text" ? e.text : "")).join("");

test("OpenAI SSE: text deltas, a tool call in pieces, usage, [DONE]", async () => {
  const chunk = (o: object) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", ...o })}\n\n`;
  const wire =
    ": keep-alive\n\n" +
    chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: { content: "Let me " }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: { content: "look." }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "read_file", arguments: "" } }] }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"pa' } }] }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: 'th":"a.txt"}' } }] }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }) +
    chunk({ choices: [], usage: { prompt_tokens: 120, completion_tokens: 9, total_tokens: 129 } }) +
    "data: [DONE]\n\n";
  const es = await events("openai", wire);
  assert.equal(text(es), "Let me look.");
  assert.deepEqual(es.filter((e) => e.type !== "text"), [
    { type: "usage", promptTokens: 120, completionTokens: 9, cachedTokens: null },
    { type: "done", toolCalls: [{ id: "call_a", name: "read_file", arguments: { path: "a.txt" } }], finishReason: "tool_calls" },
  ]);
});

test("OpenAI SSE: the cached prompt tokens of the usage chunk", async () => {
  const usage = { prompt_tokens: 2006, completion_tokens: 300, prompt_tokens_details: { cached_tokens: 1920 } };
  const es = await events("openai", `data: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`);
  assert.deepEqual(es[0], { type: "usage", promptTokens: 2006, completionTokens: 300, cachedTokens: 1920 });
});

test("prompt_cache_key: the prepared request's cacheKey goes to OpenAI's API and Azure OpenAI only", () => {
  const body = { messages: [{ role: "user", content: "hi" }] };
  const sent = (baseUrl: string, key?: string) =>
    JSON.parse(buildRequest({ kind: "openai", baseUrl, model: "m", maxOutputTokens: 1 }, body, [], key).body).prompt_cache_key;
  assert.equal(sent("https://api.openai.com/v1", "ck_1"), "ck_1");
  assert.equal(sent("https://me.openai.azure.com/openai/v1", "ck_1"), "ck_1");
  assert.equal(sent("http://localhost:11434/v1", "ck_1"), undefined, "a local server may refuse the field");
  assert.equal(sent("https://api.openai.com/v1"), undefined, "no key (protocol 2 server)");
  const anthropic = buildRequest({ kind: "anthropic", baseUrl: "", model: "c", maxOutputTokens: 1 }, body, [], "ck_1");
  assert.equal(JSON.parse(anthropic.body).prompt_cache_key, undefined);
});

test("OpenAI SSE: CRLF line ends and an error chunk", async () => {
  const ok = await events("openai", 'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\r\n\r\ndata: [DONE]\r\n\r\n');
  assert.equal(text(ok), "hi");
  await assert.rejects(events("openai", 'data: {"error":{"message":"overloaded"}}\n\n'), /overloaded/);
});

test("Anthropic SSE: text and tool_use blocks, usage with cache reads", async () => {
  const ev = (name: string, o: object) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...o })}\n\n`;
  const wire =
    ev("message_start", { message: { id: "msg_1", usage: { input_tokens: 50, cache_read_input_tokens: 10, output_tokens: 1 } } }) +
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
    ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Reading " } }) +
    ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "it." } }) +
    ev("content_block_stop", { index: 0 }) +
    ev("content_block_start", { index: 1, content_block: { type: "tool_use", id: "toolu_1", name: "read_file", input: {} } }) +
    ev("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: '{"path": ' } }) +
    ev("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: '"b.md"}' } }) +
    ev("content_block_stop", { index: 1 }) +
    "event: ping\ndata: {\"type\": \"ping\"}\n\n" +
    ev("message_delta", { delta: { stop_reason: "tool_use" }, usage: { output_tokens: 22 } }) +
    ev("message_stop", {});
  const es = await events("anthropic", wire);
  assert.equal(text(es), "Reading it.");
  assert.deepEqual(es.filter((e) => e.type !== "text"), [
    { type: "usage", promptTokens: 60, completionTokens: 22, cachedTokens: 10 },
    { type: "done", toolCalls: [{ id: "toolu_1", name: "read_file", arguments: { path: "b.md" } }], finishReason: "tool_use" },
  ]);
  await assert.rejects(events("anthropic", ev("error", { error: { type: "overloaded_error", message: "Overloaded" } })), /Overloaded/);
});

test("Ollama NDJSON: content, tool calls without ids, final counts", async () => {
  const line = (o: object) => `${JSON.stringify({ model: "llama3.2", created_at: "2026-01-01T00:00:00Z", ...o })}\n`;
  const wire =
    line({ message: { role: "assistant", content: "Sure" }, done: false }) +
    line({ message: { role: "assistant", content: "", tool_calls: [{ function: { name: "read_file", arguments: { path: "c.py" } } }] }, done: false }) +
    line({ message: { role: "assistant", content: "" }, done: true, done_reason: "stop", prompt_eval_count: 33, eval_count: 4 });
  const es = await events("ollama", wire);
  assert.equal(text(es), "Sure");
  assert.deepEqual(es.filter((e) => e.type !== "text"), [
    { type: "usage", promptTokens: 33, completionTokens: 4, cachedTokens: null },
    { type: "done", toolCalls: [{ id: "", name: "read_file", arguments: { path: "c.py" } }], finishReason: "stop" },
  ]);
});

test("requests: URL, auth header and body fields per kind; the prepared body is merged, not changed", () => {
  const body = { messages: [{ role: "user", content: "hi" }] };
  const openai = buildRequest({ kind: "openai", baseUrl: "http://127.0.0.1:1/v1/", model: "m", apiKey: "k", maxOutputTokens: 10 }, body, [READ_FILE_TOOL]);
  assert.equal(openai.url, "http://127.0.0.1:1/v1/chat/completions");
  assert.equal(openai.headers.authorization, "Bearer k");
  const o = JSON.parse(openai.body);
  assert.deepEqual(o.messages, body.messages);
  assert.equal(o.stream, true);
  assert.deepEqual(o.stream_options, { include_usage: true });
  assert.deepEqual(o.tools, [{ type: "function", function: READ_FILE_TOOL }]);

  const anthropic = buildRequest({ kind: "anthropic", baseUrl: "", model: "claude", apiKey: "sk", maxOutputTokens: 99 }, { system: "s", ...body }, [READ_FILE_TOOL]);
  assert.equal(anthropic.url, "https://api.anthropic.com/v1/messages");
  assert.equal(anthropic.headers["x-api-key"], "sk");
  assert.equal(anthropic.headers["anthropic-version"], "2023-06-01");
  const a = JSON.parse(anthropic.body);
  assert.equal(a.system, "s");
  assert.equal(a.max_tokens, 99);
  assert.deepEqual(a.tools, [{ name: "read_file", description: READ_FILE_TOOL.description, input_schema: READ_FILE_TOOL.parameters }]);

  const ollama = buildRequest({ kind: "ollama", baseUrl: "", model: "llama3.2", maxOutputTokens: 1 }, body, []);
  assert.equal(ollama.url, "http://localhost:11434/api/chat");
  assert.equal(ollama.headers.authorization, undefined, "no key, no header");
  assert.equal(JSON.parse(ollama.body).tools, undefined);
});

test("context-length errors of OpenAI, Anthropic and Ollama are recognised; others are not", () => {
  assert.ok(isContextLengthError(400, JSON.stringify({ error: { code: "context_length_exceeded", message: "This model's maximum context length is 4096 tokens." } })));
  assert.ok(isContextLengthError(400, JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" } })));
  assert.ok(isContextLengthError(400, '{"error":"the input length exceeds the context length"}'));
  assert.ok(!isContextLengthError(400, '{"error":{"message":"invalid model"}}'));
  assert.ok(!isContextLengthError(500, "context length"));
  assert.equal(errorMessage('{"error":{"message":"bad key"}}'), "bad key");
  assert.equal(errorMessage('{"error":"model not found"}'), "model not found");
  assert.equal(errorMessage("plain"), "plain");
});

test("a refusal of provider state is told from other errors; its body is reported as parsed JSON, else text", () => {
  const anthropic = JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "messages.1.content.0: Invalid `signature` in `thinking` block" } });
  assert.equal(mayRefuseProviderState(400, anthropic), true);
  assert.equal(mayRefuseProviderState(400, '{"error":{"message":"The encrypted content for item rs_1 could not be verified.","code":"invalid_encrypted_content"}}'), true);
  assert.equal(mayRefuseProviderState(400, "Function call is missing a thought_signature in functionCall parts."), true);
  assert.equal(mayRefuseProviderState(400, '{"error":{"message":"max_tokens: Field required"}}'), false);
  assert.equal(mayRefuseProviderState(500, anthropic), false, "a server error is not a refusal");
  assert.deepEqual(errorBody(anthropic), JSON.parse(anthropic));
  assert.equal(errorBody("<html>bad gateway</html>"), "<html>bad gateway</html>");
});

test("anthropic: a signed thinking block is read from the stream as the reply's provider state", async () => {
  const sse = (name: string, data: object) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
  const wire = [
    sse("message_start", { message: { usage: { input_tokens: 10, output_tokens: 1 } } }),
    sse("content_block_start", { index: 0, content_block: { type: "thinking", thinking: "", signature: "" } }),
    sse("content_block_delta", { index: 0, delta: { type: "thinking_delta", thinking: "Let me " } }),
    sse("content_block_delta", { index: 0, delta: { type: "thinking_delta", thinking: "think." } }),
    sse("content_block_delta", { index: 0, delta: { type: "signature_delta", signature: "EqQBCkYIsig" } }),
    sse("content_block_stop", { index: 0 }),
    sse("content_block_start", { index: 1, content_block: { type: "redacted_thinking", data: "EmwKAhgB" } }),
    sse("content_block_stop", { index: 1 }),
    sse("content_block_start", { index: 2, content_block: { type: "text", text: "" } }),
    sse("content_block_delta", { index: 2, delta: { type: "text_delta", text: "Hi." } }),
    sse("content_block_stop", { index: 2 }),
    sse("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } }),
    sse("message_stop", {}),
  ].join("");
  const got = await events("anthropic", wire);
  assert.deepEqual(got.filter((e) => e.type === "text"), [{ type: "text", text: "Hi." }], "thinking is not shown as the reply");
  assert.deepEqual(got.find((e) => e.type === "state"), {
    type: "state",
    providerData: { anthropic: { thinking: [{ type: "thinking", thinking: "Let me think.", signature: "EqQBCkYIsig" }, { type: "redacted_thinking", data: "EmwKAhgB" }] } },
  });
});
