/**
 * A TEST DOUBLE of a model server, for the tests only: an HTTP server on 127.0.0.1 that speaks
 * three real wire formats with scripted answers — OpenAI Chat Completions (`/v1/chat/completions`:
 * SSE chunks, `stream_options.include_usage`, streamed tool calls, the
 * `context_length_exceeded` 400), Anthropic Messages (`/v1/messages`: SSE events, `tool_use`
 * blocks with `input_json_delta`, "prompt is too long" 400) and Ollama (`/api/chat`: NDJSON,
 * tool calls without ids). It is not a model; it answers by markers in the newest user message:
 *
 *   "read hello.txt"  → a streamed `read_file` tool call {"path": "hello.txt"}; after the tool
 *                       result, a reply quoting the result's first line;
 *   "[overflow]"      → the first request for that prompt answers 400 context_length_exceeded;
 *   "[echo]"          → the reply repeats the prompt verbatim (Markdown and all);
 *   "[500]" / "[502]" → the first request for that prompt answers 500 (a JSON error) or 502 (a
 *                       proxy's HTML page); the next one answers normally;
 *   "[cut-tool]"      → the first request streams a tool call and the connection drops inside
 *                       its arguments (OpenAI format); the next one answers normally;
 *   "[cut-text]"      → the first request streams a few words and ends the body cleanly without
 *                       a finish reason or [DONE] (OpenAI format); the next one answers normally;
 *   "[slow]"          → a long reply streamed slowly (for Stop);
 *   "[think]"         → (Anthropic format) the reply starts with a signed `thinking` block
 *                       (`thinking_delta`, `signature_delta`), as extended thinking streams it;
 *   "[refuse-signature]" → (Anthropic format) the first request for that prompt whose history
 *                       sends a `thinking` block back answers Anthropic's 400 for a signature it
 *                       cannot verify (`messages.N.content.M: Invalid \`signature\` in
 *                       \`thinking\` block`, as the API words it); counted in `refusals`;
 *   a request whose last message is the assistant's (Continue of an interrupted reply: a
 *                       prefill, or the last message of the history) → " and that is the rest of
 *                       the reply." (leading space: the continuation of a cut word list);
 *   "Summarize the conversation above" (the server's compaction prompt, the last message of a
 *                       compaction request) → "SUMMARY (fake): <the user prompts it saw>", without
 *                       counting as a reply; counted in `compactions`;
 *   anything else     → "Reply #N to: <prompt>" with some Markdown, streamed word by word.
 *
 * Every request is recorded (`requests`: {path, headers, body}) for the test to inspect.
 */

import { createServer } from "node:http";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === "string" ? p : (p.text ?? ""))).join("");
  return "";
}

export async function startFakeModelServer({ chunkDelayMs = 40 } = {}) {
  const requests = [];
  const overflowed = new Set();
  let replies = 0;
  const counters = { compactions: 0, refusals: 0 };

  const server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => (raw += chunk));
    req.on("end", () => {
      void answer(req, res, raw).catch((error) => {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: String(error) } }));
      });
    });
  });

  /** The conversation of a request in one neutral shape: the newest prompt and whether the model is answering a tool result. */
  /** Every user prompt of a request, oldest first (what a compaction request asks to summarize). */
  function prompts(body) {
    return (body.messages ?? [])
      .filter((m) => m.role === "user")
      .map((m) => text(m.content))
      .filter((t) => t !== "" && !t.startsWith("Summarize the conversation above"));
  }

  function read(format, body) {
    const messages = body.messages ?? [];
    const last = messages[messages.length - 1] ?? {};
    if (format === "anthropic") {
      const blocks = (m) => (typeof m.content === "string" ? [{ type: "text", text: m.content }] : (m.content ?? []));
      const prompt = [...messages].reverse().map((m) => (m.role === "user" ? blocks(m).filter((b) => b.type === "text").map((b) => b.text).join("") : "")).find((t) => t !== "") ?? "";
      const result = last.role === "user" ? blocks(last).find((b) => b.type === "tool_result") : undefined;
      const resultText = result === undefined ? null : typeof result.content === "string" ? result.content : text(result.content);
      return { prompt, toolResult: resultText, continuing: last.role === "assistant" };
    }
    const prompt = text([...messages].reverse().find((m) => m.role === "user")?.content ?? "");
    return { prompt, toolResult: last.role === "tool" ? text(last.content) : null, continuing: last.role === "assistant" };
  }

  /** What to answer, whatever the wire format. */
  function script(prompt, toolResult, body, continuing) {
    if (continuing) return { type: "text", text: " and that is the rest of the reply." };
    if (toolResult === null && prompt.startsWith("Summarize the conversation above")) {
      counters.compactions++;
      return { type: "text", text: `SUMMARY (fake): the person asked ${prompts(body).map((p) => JSON.stringify(p)).join(", ")}.` };
    }
    if (prompt.includes("[refuse-signature]") && !overflowed.has(`refuse:${prompt}`)) {
      const at = signedThinking(body);
      if (at !== null) {
        overflowed.add(`refuse:${prompt}`);
        counters.refusals++;
        return { type: "refuse-signature", at };
      }
    }
    if (prompt.includes("[overflow]") && !overflowed.has(prompt)) {
      overflowed.add(prompt);
      return { type: "overflow" };
    }
    for (const marker of ["500", "502", "cut-tool", "cut-text"]) {
      if (toolResult === null && prompt.includes(`[${marker}]`) && !overflowed.has(`${marker}:${prompt}`)) {
        overflowed.add(`${marker}:${prompt}`);
        return { type: marker };
      }
    }
    if (prompt.includes("[slow]")) {
      return { type: "text", slow: true, text: `A slow reply to: ${prompt}\n\n${"word ".repeat(200)}` };
    }
    if (prompt.includes("[think]")) {
      return { type: "text", thinking: `The person asked: ${prompt}. Answer briefly.`, text: `Reply #${++replies} to: ${prompt}\n\nThought about it first.` };
    }
    if (toolResult === null && prompt.includes("read hello.txt")) return { type: "tool", name: "read_file", args: { path: "hello.txt" } };
    if (toolResult !== null) return { type: "text", text: `The file says: **${toolResult.split("\n")[0]}**` };
    if (prompt.includes("[echo]")) return { type: "text", text: prompt };
    return { type: "text", text: `Reply #${++replies} to: ${prompt}\n\nSome *Markdown*: \`code\` and a list:\n- one\n- two` };
  }

  /** Where a request sends a `thinking` block back ("messages.N.content.M"), or null. */
  function signedThinking(body) {
    const messages = body.messages ?? [];
    for (let n = 0; n < messages.length; n++) {
      const blocks = Array.isArray(messages[n].content) ? messages[n].content : [];
      const m = blocks.findIndex((b) => b?.type === "thinking");
      if (m >= 0) return `messages.${n}.content.${m}`;
    }
    return null;
  }

  const ROUTES = { "/v1/chat/completions": "openai", "/v1/messages": "anthropic", "/api/chat": "ollama" };

  async function answer(req, res, raw) {
    const format = req.method === "POST" ? ROUTES[req.url] : undefined;
    if (format === undefined) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    const body = JSON.parse(raw);
    requests.push({ path: req.url, headers: req.headers, body });
    const { prompt, toolResult, continuing } = read(format, body);
    const plan = script(prompt, toolResult, body, continuing);
    const promptTokens = Math.ceil(raw.length / 4);
    const writer = { openai: openaiAnswer, anthropic: anthropicAnswer, ollama: ollamaAnswer }[format];
    await writer(res, body, plan, promptTokens, requests.length);
  }

  function json(res, status, value) {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(value));
  }

  const words = (t) => t.split(/(?<=\s)/);

  async function openaiAnswer(res, body, plan, promptTokens, n) {
    if (plan.type === "500") return json(res, 500, { error: { message: "The server had an error while processing your request.", type: "server_error" } });
    if (plan.type === "502") {
      res.writeHead(502, { "content-type": "text/html" });
      res.end("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n");
      return;
    }
    if (plan.type === "overflow") {
      return json(res, 400, {
        error: {
          message: `This model's maximum context length is 4096 tokens. However, your messages resulted in ${promptTokens + 5000} tokens. Please reduce the length of the messages.`,
          type: "invalid_request_error",
          param: "messages",
          code: "context_length_exceeded",
        },
      });
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const id = `chatcmpl-fake-${n}`;
    const base = () => ({ id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: body.model });
    const send = (delta, finish = null) => res.write(`data: ${JSON.stringify({ ...base(), choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
    const usage = (completion) =>
      res.write(`data: ${JSON.stringify({ ...base(), choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion } })}\n\n`);
    if (plan.type === "cut-tool") {
      send({ role: "assistant", content: "Let me look. " });
      send({ tool_calls: [{ index: 0, id: "call_cut_1", type: "function", function: { name: "read_file", arguments: "" } }] });
      await sleep(chunkDelayMs);
      send({ tool_calls: [{ index: 0, function: { arguments: '{"path": "hel' } }] });
      await sleep(chunkDelayMs);
      res.destroy(); // the connection drops inside the call's arguments
      return;
    }
    if (plan.type === "cut-text") {
      send({ role: "assistant", content: "" });
      for (const word of words("This reply stops in the middle of")) {
        await sleep(chunkDelayMs);
        send({ content: word });
      }
      res.end(); // no finish_reason, no [DONE]
      return;
    }
    if (plan.type === "tool") {
      send({ role: "assistant", content: null });
      const args = JSON.stringify(plan.args);
      send({ tool_calls: [{ index: 0, id: "call_fake_1", type: "function", function: { name: plan.name, arguments: "" } }] });
      for (const part of [args.slice(0, 7), args.slice(7)]) {
        await sleep(chunkDelayMs);
        send({ tool_calls: [{ index: 0, function: { arguments: part } }] });
      }
      send({}, "tool_calls");
      usage(12);
    } else {
      send({ role: "assistant", content: "" });
      const parts = words(plan.text);
      for (const word of parts) {
        if (res.destroyed) return; // the client stopped reading (Stop)
        await sleep(plan.slow ? Math.max(chunkDelayMs, 60) : chunkDelayMs);
        send({ content: word });
      }
      send({}, "stop");
      usage(parts.length);
    }
    res.end("data: [DONE]\n\n");
  }

  async function anthropicAnswer(res, body, plan, promptTokens, n) {
    if (plan.type === "refuse-signature") {
      return json(res, 400, {
        type: "error",
        error: { type: "invalid_request_error", message: `${plan.at}: Invalid \`signature\` in \`thinking\` block` },
      });
    }
    if (plan.type === "overflow") {
      return json(res, 400, {
        type: "error",
        error: { type: "invalid_request_error", message: `prompt is too long: ${promptTokens + 200000} tokens > 200000 maximum` },
      });
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const event = (name, data) => res.write(`event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`);
    event("message_start", {
      message: { id: `msg_fake_${n}`, type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, usage: { input_tokens: promptTokens, output_tokens: 1 } },
    });
    let output = 0;
    if (plan.type === "tool") {
      event("content_block_start", { index: 0, content_block: { type: "tool_use", id: "toolu_fake_1", name: plan.name, input: {} } });
      const args = JSON.stringify(plan.args);
      for (const part of [args.slice(0, 5), args.slice(5)]) {
        await sleep(chunkDelayMs);
        event("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: part } });
      }
      event("content_block_stop", { index: 0 });
      output = 10;
    } else {
      let index = 0;
      if (plan.thinking) {
        event("content_block_start", { index, content_block: { type: "thinking", thinking: "", signature: "" } });
        for (const word of words(plan.thinking)) {
          await sleep(chunkDelayMs);
          event("content_block_delta", { index, delta: { type: "thinking_delta", thinking: word } });
        }
        event("content_block_delta", { index, delta: { type: "signature_delta", signature: `EqQBCkYIARgCKkBfake${n}signature` } });
        event("content_block_stop", { index });
        index++;
      }
      event("content_block_start", { index, content_block: { type: "text", text: "" } });
      for (const word of words(plan.text)) {
        if (res.destroyed) return; // the client stopped reading (Stop)
        await sleep(plan.slow ? Math.max(chunkDelayMs, 60) : chunkDelayMs);
        event("content_block_delta", { index, delta: { type: "text_delta", text: word } });
        output++;
      }
      event("content_block_stop", { index });
    }
    event("message_delta", { delta: { stop_reason: plan.type === "tool" ? "tool_use" : "end_turn", stop_sequence: null }, usage: { output_tokens: output } });
    event("message_stop", {});
    res.end();
  }

  async function ollamaAnswer(res, body, plan, promptTokens) {
    if (plan.type === "overflow") return json(res, 400, { error: "the input length exceeds the context length" });
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const line = (message, extra = {}) =>
      res.write(`${JSON.stringify({ model: body.model, created_at: new Date().toISOString(), message: { role: "assistant", ...message }, done: false, ...extra })}\n`);
    let output = 0;
    if (plan.type === "tool") {
      line({ content: "", tool_calls: [{ function: { name: plan.name, arguments: plan.args } }] });
      output = 10;
    } else {
      for (const word of words(plan.text)) {
        await sleep(chunkDelayMs);
        line({ content: word });
        output++;
      }
    }
    line({ content: "" }, { done: true, done_reason: "stop", prompt_eval_count: promptTokens, eval_count: output });
    res.end();
  }

  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Compaction requests answered (the server's summarizing prompt). */
    get compactions() {
      return counters.compactions;
    },
    /** Requests refused for a thinking signature ("[refuse-signature]"). */
    get refusals() {
      return counters.refusals;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
