/**
 * A TEST DOUBLE of a model server, for the e2e only: an HTTP server on 127.0.0.1 that speaks
 * OpenAI's Chat Completions wire format (SSE streaming with `stream_options.include_usage`,
 * streamed tool calls, the `context_length_exceeded` 400) with scripted answers. It is not a
 * model; it answers by markers in the newest user message:
 *
 *   "read hello.txt"  → a streamed `read_file` tool call {"path": "hello.txt"}; after the tool
 *                       result, a reply quoting the result's first line;
 *   "[overflow]"      → the first request for that prompt answers 400 context_length_exceeded;
 *   "[echo]"          → the reply repeats the prompt verbatim (Markdown and all);
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

  async function answer(req, res, raw) {
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    const body = JSON.parse(raw);
    requests.push({ path: req.url, headers: req.headers, body });
    const messages = body.messages ?? [];
    const last = messages[messages.length - 1] ?? {};
    const prompt = text([...messages].reverse().find((m) => m.role === "user")?.content ?? "");
    const promptTokens = Math.ceil(raw.length / 4);

    if (prompt.includes("[overflow]") && !overflowed.has(prompt)) {
      overflowed.add(prompt);
      res.writeHead(400, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: {
            message: `This model's maximum context length is 4096 tokens. However, your messages resulted in ${promptTokens + 5000} tokens. Please reduce the length of the messages.`,
            type: "invalid_request_error",
            param: "messages",
            code: "context_length_exceeded",
          },
        }),
      );
      return;
    }

    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const id = `chatcmpl-fake-${requests.length}`;
    const send = (delta, finish = null, extra = {}) =>
      res.write(
        `data: ${JSON.stringify({
          id,
          object: "chat.completion.chunk",
          created: Math.floor(Date.now() / 1000),
          model: body.model,
          choices: [{ index: 0, delta, finish_reason: finish }],
          ...extra,
        })}\n\n`,
      );
    const usage = (completion) =>
      res.write(
        `data: ${JSON.stringify({
          id,
          object: "chat.completion.chunk",
          created: Math.floor(Date.now() / 1000),
          model: body.model,
          choices: [],
          usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion },
        })}\n\n`,
      );

    if (last.role === "user" && prompt.includes("read hello.txt")) {
      send({ role: "assistant", content: null });
      const args = JSON.stringify({ path: "hello.txt" });
      send({ tool_calls: [{ index: 0, id: "call_fake_1", type: "function", function: { name: "read_file", arguments: "" } }] });
      for (const part of [args.slice(0, 7), args.slice(7)]) {
        await sleep(chunkDelayMs);
        send({ tool_calls: [{ index: 0, function: { arguments: part } }] });
      }
      send({}, "tool_calls");
      usage(12);
      res.end("data: [DONE]\n\n");
      return;
    }

    let reply;
    if (last.role === "tool") reply = `The file says: **${text(last.content).split("\n")[0]}**`;
    else if (prompt.includes("[echo]")) reply = prompt;
    else reply = `Reply #${++replies} to: ${prompt}\n\nSome *Markdown*: \`code\` and a list:\n- one\n- two`;
    send({ role: "assistant", content: "" });
    const words = reply.split(/(?<=\s)/);
    for (const word of words) {
      await sleep(chunkDelayMs);
      send({ content: word });
    }
    send({}, "stop");
    usage(words.length);
    res.end("data: [DONE]\n\n");
  }

  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
