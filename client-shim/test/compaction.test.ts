/** Version 2 compaction and calibration through ChatHistoryClient against the real server. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidParamsError } from "../src/client";
import type { CompactionProposal, Message, OpenAIBody } from "../src/types";
import { rowTokens, startServer } from "./helpers";

const KEEP_ALL = { maxMessages: 100_000, maxTokens: 0, maxAgeHours: 0 };

function longTurn(n: number): Message[] {
  return [
    { role: "user", content: `U${n}: ` + "u".repeat(200) },
    { role: "assistant", content: `A${n}: ` + "a".repeat(200) },
  ];
}

test("reportUsage answers the calibration; prepare reports it and calibrates its estimate", async (t) => {
  const { client } = await startServer(t, { settings: KEEP_ALL });
  await client.append({ conversationId: "cal", messages: [{ role: "user", content: "x".repeat(400) }] });
  const before = await client.prepare({ conversationId: "cal", provider: "openai" });
  assert.deepEqual(before.calibration, { factor: 1, samples: 0 });
  assert.equal(before.rawEstimatedTokens, rowTokens("x".repeat(400)));
  assert.equal(before.estimatedTokens, before.rawEstimatedTokens);
  assert.equal(before.compaction, null);
  assert.equal(before.compactedTurns, 0);
  assert.equal(before.compactedMessages, 0);

  const calibration = await client.reportUsage({
    provider: "openai",
    estimatedTokens: before.rawEstimatedTokens,
    promptTokens: before.rawEstimatedTokens * 2,
  });
  assert.deepEqual(calibration, { factor: 2, samples: 1 });
  const after = await client.prepare({ conversationId: "cal", provider: "openai" });
  assert.deepEqual(after.calibration, calibration);
  assert.equal(after.rawEstimatedTokens, before.rawEstimatedTokens);
  assert.equal(after.estimatedTokens, before.rawEstimatedTokens * 2);

  await assert.rejects(client.reportUsage({ estimatedTokens: 0, promptTokens: 5 }), (error: unknown) => {
    assert.ok(error instanceof InvalidParamsError);
    assert.equal(error.field, "estimatedTokens");
    return true;
  });
});

test("a compaction proposal, saved as the summary, stands in for the turns it covers", async (t) => {
  const { client } = await startServer(t, {
    settings: {
      ...KEEP_ALL,
      context: { maxContextTokens: 1_000, compaction: { keepRecentTurns: 2, maxSummaryTokens: 300 } },
    },
  });
  for (let n = 1; n <= 8; n++) await client.append({ conversationId: "long", messages: longTurn(n) });
  const first = await client.prepare({ conversationId: "long", provider: "openai" });
  const proposal: CompactionProposal<OpenAIBody> | null = first.compaction;
  assert.ok(proposal !== null, "8 turns of about 112 tokens pass 80% of a 1,000 budget");
  assert.equal(proposal.request.provider, "openai");
  const body = proposal.request.body.messages as Array<{ content: string }>;
  assert.match(body[body.length - 1]!.content, /^Summarize the conversation above/);

  await client.saveSummary({ conversationId: "long", summary: "The user counted turns.", coversThroughId: proposal.throughId });
  const next = await client.prepare({ conversationId: "long", provider: "openai" });
  assert.equal(next.compactedTurns, proposal.coveredTurns);
  assert.equal(next.compactedMessages, 2 * proposal.coveredTurns);
  assert.ok(next.estimatedTokens < first.estimatedTokens);
  const sent = (next.body["messages"] as Array<{ content: string }>).map((m) => m.content);
  assert.equal(sent[0], "[Summary of earlier turns]\nThe user counted turns.");
  assert.ok(!sent.some((text) => text.startsWith("U1: ")), "covered turns are not sent");
  assert.equal((await client.get({ conversationId: "long" })).messages.length, 16, "get is still whole");
});
