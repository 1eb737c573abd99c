/**
 * Compile-only check (`tsc -p tsconfig.vscode.json`): the connections an extension or a Node
 * host already has satisfy `RpcConnection`, so `new ChatHistoryClient(x)` needs no adapter.
 * The `@ts-expect-error` lines prove the check has teeth: if an interface with a member
 * LanguageClient lacks were accepted, tsc would report the unused directive.
 */

import type { MessageConnection } from "vscode-jsonrpc/node";
import type { LanguageClient } from "vscode-languageclient/node";
import { ChatHistoryClient, type RpcConnection } from "../../src/client";

declare const languageClient: LanguageClient;
declare const messageConnection: MessageConnection;

export const fromLanguageClient: RpcConnection = languageClient;
export const fromMessageConnection: RpcConnection = messageConnection;
export const client = new ChatHistoryClient(languageClient);

interface RpcConnectionWithBogusMember extends RpcConnection {
  bogusMemberThatDoesNotExist(): void;
}
// @ts-expect-error LanguageClient has no bogusMemberThatDoesNotExist
export const bogus: RpcConnectionWithBogusMember = languageClient;

// Typed bodies follow a literal provider kind.
export async function typedBodies(): Promise<void> {
  const anthropic = await client.prepare({ conversationId: "c", provider: "anthropic" });
  const system: string | object[] | undefined = anthropic.body.system;
  const gemini = await client.format({ conversationId: "c", provider: "gemini" });
  const contents: object[] = gemini.body.contents;
  // @ts-expect-error an Anthropic body has no `contents`
  void anthropic.body.contents;
  void system;
  void contents;
}
