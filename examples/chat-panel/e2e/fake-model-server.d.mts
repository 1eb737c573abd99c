/** Types of the test double ./fake-model-server.mjs (used by test/chat.test.ts). */
export interface RecordedRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: { model: string; stream: boolean; messages: { role: string; content: unknown; tool_call_id?: string }[]; tools?: unknown[] };
}
export interface FakeModelServer {
  url: string;
  requests: RecordedRequest[];
  /** Compaction requests answered (the server's summarizing prompt). */
  readonly compactions: number;
  /** Requests refused for a thinking signature ("[refuse-signature]"). */
  readonly refusals: number;
  close(): Promise<void>;
}
export function startFakeModelServer(options?: { chunkDelayMs?: number }): Promise<FakeModelServer>;
