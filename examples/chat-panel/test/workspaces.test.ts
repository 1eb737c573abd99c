/**
 * History of other workspaces (src/workspaces.ts): names, the move offer, and the requests the
 * panel makes, against the real history server over stdio (two sessions on one storage folder).
 */

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { test, type TestContext } from "node:test";
import { startStdioServer, type WorkspaceInfo } from "chat-history-client";
import * as S from "../src/state";
import * as V from "../src/view";
import * as W from "../src/workspaces";

const REPO = resolve(__dirname, "..", "..", "..", "..");
const VENV_PYTHON = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.CHAT_HISTORY_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");

function info(extra: Partial<WorkspaceInfo>): WorkspaceInfo {
  return { workspace: "file:///w", conversations: 1, lastActivity: 1764480000000, folder: null, folderExists: null, repository: null, ...extra };
}

const turn = (text: string) => [
  { role: "user" as const, content: text },
  { role: "assistant" as const, content: `Reply to: ${text}` },
];

/** A session of the real server on `storage`, for the folder `folder` (its workspace). */
async function session(t: TestContext, storage: string, folder: string) {
  const uri = pathToFileURL(folder).href;
  const server = await startStdioServer({
    command: PYTHON,
    args: ["-m", "chat_history"],
    storagePath: storage,
    workspaceFolders: [{ uri, name: "ws" }],
  });
  let stopped = false;
  const stop = async () => {
    if (!stopped) await server.shutdown();
    stopped = true;
  };
  t.after(stop);
  return { client: server.client, uri, stop };
}

/** A git working tree with an `origin` remote (the server records its folder), read from its files. */
function gitFolder(path: string, remote: string): void {
  mkdirSync(join(path, ".git"), { recursive: true });
  writeFileSync(join(path, ".git", "HEAD"), "ref: refs/heads/main\n");
  writeFileSync(join(path, ".git", "config"), `[core]\n\tbare = false\n[remote "origin"]\n\turl = ${remote}\n`);
}

test("a workspace is named by its folder, its repository, or its URI's last segment", () => {
  assert.equal(W.workspaceName(info({ folder: "/home/me/old-project" })), "old-project");
  assert.equal(W.workspaceName(info({ folder: "C:\\Users\\me\\proj" })), "proj");
  assert.equal(W.workspaceName(info({ workspace: "file:///home/me/caf%C3%A9/" })), "café");
  assert.equal(W.workspaceName(info({ workspace: "repo:github.com/team/app/web", repository: "github.com/team/app" })), "app/web");
  assert.equal(W.workspaceName(info({ workspace: "repo:github.com/team/app/", repository: "github.com/team/app" })), "app");
  assert.equal(W.workspaceName(info({ workspace: "default" })), "default");
});

test("the list says where each workspace's folder is: this one, gone, or on another machine", () => {
  assert.equal(W.workspaceDescription(info({ conversations: 2, folder: "/a", folderExists: true }), true), "this workspace · 2 conversations");
  assert.equal(W.workspaceDescription(info({ folder: "/a", folderExists: false }), false), "1 conversation · folder no longer exists");
  assert.equal(W.workspaceDescription(info({ folder: "/a", folderExists: null }), false), "1 conversation · on another machine");
  assert.equal(W.workspaceDescription(info({ folder: null, folderExists: null }), false), "1 conversation");
  assert.match(W.workspaceTooltip(info({ folder: "/a", folderExists: false, repository: "github.com/t/a" })), /Folder: \/a \(folder no longer exists\)\nRepository: github\.com\/t\/a/);
});

test("all workspaces: this one first, even before it has a conversation; then the others as listed", () => {
  const listed = [info({ workspace: "file:///b" }), info({ workspace: "file:///a" }), info({ workspace: "file:///c" })];
  assert.deepEqual(
    W.workspaceGroups(listed, "file:///a").map((w) => w.workspace),
    ["file:///a", "file:///b", "file:///c"],
  );
  const groups = W.workspaceGroups(listed, "file:///new");
  assert.deepEqual(groups.map((w) => [w.workspace, w.conversations]), [["file:///new", 0], ["file:///b", 1], ["file:///a", 1], ["file:///c", 1]]);
});

test("a move is offered unasked only for a workspace whose folder is gone, with conversations, once", () => {
  const gone = info({ workspace: "file:///gone", folder: "/gone", folderExists: false, conversations: 3 });
  const listed = [
    gone,
    info({ workspace: "file:///here", folder: "/here", folderExists: false }),
    info({ workspace: "file:///alive", folder: "/alive", folderExists: true }),
    info({ workspace: "file:///elsewhere", folder: "/x", folderExists: null }),
    info({ workspace: "file:///empty", folder: "/empty", folderExists: false, conversations: 0 }),
  ];
  assert.deepEqual(W.moveOffers(listed, "file:///here", new Set()), [gone]);
  assert.deepEqual(W.moveOffers(listed, "file:///here", new Set(["file:///gone"])), []);
  assert.equal(W.offerText(gone), 'The folder of "gone" (/gone) no longer exists. Move its 3 conversations into this workspace?');
  assert.equal(W.offerText({ ...gone, conversations: 1 }), 'The folder of "gone" (/gone) no longer exists. Move its conversation into this workspace?');
  assert.equal(W.confirmText(gone).message, 'Move 3 conversations from "gone" into this workspace?');
  assert.match(W.confirmText(gone).detail, /Nothing is deleted/);
});

test("a chat of another workspace is read-only: its key names that workspace, only Copy, a banner in words", () => {
  const elsewhere = { workspace: "file:///old", name: "old" };
  const state = S.pageLoaded(
    S.emptyState("c1", "Old notes", elsewhere),
    {
      messages: [
        { id: 1, turn: 1, tokens: 3, role: "user", content: "hi", toolCalls: [], toolCallId: null, name: null, attachments: [], timestamp: 1, providerData: {}, metadata: {}, status: "complete", origin: null, parentId: null, siblings: { index: 0, count: 1, ids: [] } },
        { id: 2, turn: 1, tokens: 3, role: "assistant", content: "hello", toolCalls: [], toolCallId: null, name: null, attachments: [], timestamp: 1, providerData: {}, metadata: {}, status: "complete", origin: null, parentId: null, siblings: { index: 0, count: 1, ids: [] } },
      ],
      hasMore: false,
    },
    false,
  );
  assert.deepEqual(S.keyOf(state), { conversationId: "c1", workspace: "file:///old" });
  const view = V.viewOf(state, 3);
  assert.deepEqual(view.messages.map((m) => m.actions), [["copy"], ["copy"]]);
  assert.match(view.elsewhere ?? "", /^This chat belongs to the workspace "old" and is read-only here\. To reply, continue it in this workspace/);
  // This workspace's chat: every action, no banner, the session's key.
  const own = { ...state, elsewhere: null };
  assert.deepEqual(S.keyOf(own), { conversationId: "c1" });
  assert.equal(V.viewOf(own, 3).elsewhere, null);
  assert.ok(V.viewOf(own, 3).messages[0].actions.includes("edit"));
});

test("real server: the session's identity is asked without storing anything; another workspace's chat reads and continues here as a copy", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "chat-panel-ws-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const storage = join(root, "store");
  const a = join(root, "project-a");
  const b = join(root, "project-b");
  mkdirSync(a);
  mkdirSync(b);
  const first = await session(t, storage, a);
  await first.client.append({ conversationId: "notes", messages: turn("Notes from A") });
  await first.stop();

  const { client, uri } = await session(t, storage, b);
  const current = await W.sessionWorkspace(client);
  assert.equal(current, uri);
  assert.deepEqual((await client.listConversations({})).conversations, [], "asking stored nothing");
  const groups = W.workspaceGroups((await client.listWorkspaces()).workspaces, current);
  assert.deepEqual(groups.map((w) => [W.workspaceName(w), w.conversations]), [["project-b", 0], ["project-a", 1]]);

  const other = groups[1];
  const [listed] = await W.conversationsOf(client, other.workspace);
  assert.equal(listed.title, "Notes from A");
  const page = await client.get({ ...S.keyOf(S.emptyState("notes", "Notes from A", { workspace: other.workspace, name: "project-a" })) });
  assert.deepEqual(page.messages.map((m) => m.content), ["Notes from A", "Reply to: Notes from A"]);

  const copy = await W.continueHere(client, { conversationId: "notes", workspace: other.workspace }, current, "notes-copy");
  assert.equal(copy.workspace, current);
  assert.equal(copy.messageCount, 2);
  await client.append({ conversationId: "notes-copy", messages: turn("Continued in B") });
  assert.equal((await client.get({ conversationId: "notes", workspace: other.workspace })).messages.length, 2, "the original stays as it was");
});

test("real server: a deleted git folder's history is offered and moved here; a conversation id in both moves nothing, said in words", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "chat-panel-ws-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const storage = join(root, "store");
  const old = join(root, "old-project");
  const here = join(root, "new-project");
  gitFolder(old, "https://example.com/team/old-project.git");
  mkdirSync(here);
  const first = await session(t, storage, old);
  await first.client.append({ conversationId: "plan", messages: turn("The old plan") });
  await first.client.append({ conversationId: "shared", messages: turn("Old shared") });
  await first.stop();
  rmSync(old, { recursive: true, force: true });

  const { client } = await session(t, storage, here);
  const current = await W.sessionWorkspace(client);
  await client.append({ conversationId: "shared", messages: turn("New shared") });
  const [offer, ...more] = W.moveOffers((await client.listWorkspaces()).workspaces, current, new Set());
  assert.deepEqual(more, []);
  assert.equal(offer.folder, old);
  assert.equal(offer.folderExists, false);
  assert.equal(W.offerText(offer), `The folder of "old-project" (${old}) no longer exists. Move its 2 conversations into this workspace?`);

  // "shared" is in both: the move is refused (-32602 `to`), in words, and nothing moved.
  const refused = await W.moveHistory(client, offer, current);
  assert.ok(!refused.ok);
  assert.equal(refused.text, 'Nothing was moved from "old-project".');
  assert.match(refused.detail, /^Conversation 'shared' exists in both workspaces \(1 in all\)\. Both workspaces keep all their conversations\. Delete one of the two/);
  assert.deepEqual((await W.conversationsOf(client, offer.workspace)).map((c) => c.conversationId).sort(), ["plan", "shared"]);
  assert.deepEqual((await W.conversationsOf(client, undefined)).map((c) => c.title), ["New shared"]);

  await client.clear({ conversationId: "shared" });
  const moved = await W.moveHistory(client, offer, current);
  assert.deepEqual(moved, { ok: true, moved: 2, text: 'Moved 2 conversations here from "old-project".' });
  assert.deepEqual((await W.conversationsOf(client, undefined)).map((c) => c.title).sort(), ["Old shared", "The old plan"]);
  assert.deepEqual(W.moveOffers((await client.listWorkspaces()).workspaces, current, new Set()), [], "nothing left to offer");
});
