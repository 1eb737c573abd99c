/**
 * The actions on a message of the panel (copy, edit and resend, regenerate, delete exchange,
 * redact, fork), Retry of a cut reply and Undo of a summary; every rewind guarded by what the
 * person saw (`expectedLastId`). Which action a row offers is ./view's; where a rewind starts,
 * ./edits'.
 */

import * as vscode from "vscode";
import { ConversationChangedError, InvalidParamsError } from "chat-history-client";
import * as E from "./edits";
import { newConversationId, type PanelHost } from "./host";
import * as R from "./replies";
import * as S from "./state";
import * as T from "./stream";
import type { Turn } from "./turn";
import * as V from "./view";

export class MessageActions {
  /** The server takes `expectedLastId` (version 3); one from before refuses the field. */
  private expectedLastIdKnown = true;

  constructor(
    private readonly host: PanelHost,
    private readonly turn: Turn,
  ) {}

  /**
   * A rewind (truncate, deleteTurns, editMessage) made only while the newest stored row is the
   * one the person saw when they clicked (`expectedLastId`: `seen`, from what the webview had
   * painted). Undefined when the view was stale: the server changed nothing (1003), and the panel
   * reloads and says so. A server from before version 3 gets the request without the field.
   */
  private async guarded<T>(seen: number | null, run: (expected: { expectedLastId?: number | null }) => Promise<T>, whole = false): Promise<T | undefined> {
    try {
      return await run(this.expectedLastIdKnown ? { expectedLastId: seen } : {});
    } catch (error) {
      if (error instanceof ConversationChangedError) {
        await this.changedElsewhere(whole);
        return undefined;
      }
      if (this.expectedLastIdKnown && error instanceof InvalidParamsError && error.message.includes("expectedLastId")) {
        this.expectedLastIdKnown = false;
        return run({});
      }
      throw error;
    }
  }

  /**
   * A click on a stale view: the server refused its rewind (1003), or the panel did not send it
   * (the row clicked is gone, the newest row seen is not the one the click would act on).
   * Nothing changed; the panel shows what is stored and says so.
   */
  private async changedElsewhere(whole = false): Promise<void> {
    await this.host.reload(false, whole);
    this.host.update(
      S.addNotice(
        this.host.state,
        "info",
        "This chat changed in another window, so nothing was changed here. It now shows the latest messages: try again if you still want to.",
        S.CHANGED_NOTICE,
      ),
    );
  }

  /**
   * A choice of the offer of a cut reply (Continue, Retry, Keep, or dismissing it, which keeps
   * it), only for the reply the screen showed as the newest row (`seenId`).
   */
  async cutChoice(choice: "continue" | "retryCut" | "keepCut", seenId: unknown): Promise<void> {
    // No offer stands (a turn runs, or it was taken already): nothing to do.
    if (R.cutReply(this.host.state) === null) return;
    if (!R.cutSeen(this.host.state, S.seenLastId(seenId))) return this.changedElsewhere();
    if (choice === "continue") return this.turn.continueCut();
    if (choice === "keepCut") return this.turn.keepCut();
    return this.retryCut();
  }

  /** Retry of a cut reply: it goes (`truncate` from it), and its prompt is answered again. */
  private async retryCut(): Promise<void> {
    const cut = R.cutReply(this.host.state);
    if (cut === null || cut.prompt === null) return;
    const { conversationId } = this.host.state;
    const fromId = cut.reply.id!;
    const client = await this.host.client();
    // The offer is for the newest row: the cut reply is what the person saw last.
    const done = await this.guarded(fromId, (expected) => client.truncate({ conversationId, fromId, ...expected }));
    if (done === undefined) return;
    this.host.update(E.truncated(this.host.state, fromId));
    await this.turn.send(cut.prompt.content, true);
  }

  /** Undo of "earlier turns summarized": the summary goes, the turns are sent again. */
  async undoSummary(): Promise<void> {
    const conversationId = this.host.state.conversationId;
    await (await this.host.client()).deleteSummary({ conversationId });
    if (conversationId === this.host.state.conversationId) {
      this.host.update(S.addNotice(S.summaryShown(this.host.state, null), "info", "Summary removed: the earlier turns are sent again (as far as the budget allows)."));
    }
  }

  private async rewind(id: number, kind: "edit" | "regenerate", seen: number | null): Promise<void> {
    if (this.host.state.busy) return;
    const target = this.host.state.messages.find((m) => m.id === id);
    if (target === undefined) return;
    let text = "";
    if (kind === "edit") {
      const edited = await vscode.window.showInputBox({
        title: "Edit and resend",
        prompt:
          this.host.protocolVersion() >= 5
            ? "The new prompt is a variant of this one: the model answers it, and ‹ › beside it shows the earlier one again."
            : "This prompt and everything after it are replaced; the model answers the new one.",
        value: target.content,
      });
      if (edited === undefined || edited.trim() === "") return;
      text = edited;
    }
    if (this.host.protocolVersion() >= 5) return this.branch(id, kind, text, seen);
    const rewind = E.rewindFor(this.host.state, id, kind, text);
    if (rewind === null) return;
    const conversationId = this.host.state.conversationId;
    const client = await this.host.client();
    const done = await this.guarded(seen, (expected) => client.truncate({ conversationId, fromId: rewind.fromId, ...expected }));
    if (done === undefined) return;
    this.host.update(E.truncated(this.host.state, rewind.fromId));
    await this.turn.send(rewind.prompt, rewind.promptStored);
  }

  /**
   * Version 5: Regenerate and Edit & resend make a branch, nothing is deleted (./edits'
   * branchFor). Regenerate begins the new reply after the prompt (`beginReply` `parentId`, with
   * `expectedLastId`: a stale screen changes nothing, 1003) before the request is prepared, so
   * that it reads the new branch; Edit & resend appends the new prompt after the edited one's
   * parent (`append` takes no `expectedLastId`: the click acts only when the screen showed the
   * newest row the panel holds) and runs its turn.
   */
  private async branch(id: number, kind: "edit" | "regenerate", text: string, seen: number | null): Promise<void> {
    const host = this.host;
    const branch = E.branchFor(host.state, id, kind, text);
    if (branch === null) return;
    const conversationId = host.state.conversationId;
    const client = await host.client();
    if (kind === "regenerate") {
      const row = await this.guarded(seen, (expected) => client.beginReply({ conversationId, parentId: branch.parentId, ...expected }), true);
      if (row === undefined || conversationId !== host.state.conversationId) return;
      host.update(E.branched(host.state, branch.keep));
      await this.turn.send(branch.prompt, true, undefined, row);
      return;
    }
    if (seen !== S.newestId(host.state)) return this.changedElsewhere(true);
    const stored = await client.append({ conversationId, parentId: branch.parentId, messages: [{ role: "user", content: branch.prompt }] });
    if (conversationId !== host.state.conversationId) return;
    host.update(T.rowsStored(E.branched(host.state, branch.keep), stored.messages));
    void host.list.refresh();
    await this.turn.send(branch.prompt, true);
  }

  /**
   * Version 5: `‹ ›` on a row with variants: the path through the sibling `id` becomes the active
   * path (`switchBranch`, with `expectedLastId`: a stale screen changes nothing and the panel
   * reloads and says so), shown at that row.
   */
  async switchBranch(id: number, seenId: unknown): Promise<void> {
    const host = this.host;
    if (host.state.elsewhere !== null || host.state.busy || host.protocolVersion() < 5) return;
    const seen = S.seenLastId(seenId);
    if (seen === undefined) return this.changedElsewhere(true);
    const conversationId = host.state.conversationId;
    const client = await host.client();
    const limit = Math.max(host.state.messages.filter((m) => m.id !== null).length, 1) + 50;
    const switched = await this.guarded(seen, (expected) => client.switchBranch({ conversationId, id, limit: Math.min(10_000, limit), ...expected }), true);
    if (switched === undefined || conversationId !== host.state.conversationId) return;
    host.update(S.branchShown(host.state, switched, id));
    // A variant of the first prompt is the automatic title: the tab and the list follow.
    await host.refreshTitle();
  }

  /**
   * The action `action` on the stored row `id`, as the person clicked it on the screen (`seenId`:
   * the newest stored row the webview had painted). A row the panel no longer holds, or an unknown
   * `seenId`, acts on nothing: the chat changed since the screen was drawn.
   */
  async run(action: string, id: number, seenId: unknown): Promise<void> {
    const host = this.host;
    // Another workspace's chat is read-only here: only what changes nothing.
    if (host.state.elsewhere !== null && !V.READ_ONLY_ACTIONS.includes(action)) return;
    const target = host.state.messages.find((m) => m.id === id);
    if (target === undefined) return this.changedElsewhere();
    if (action === "copy") return vscode.env.clipboard.writeText(target.content);
    // Every other action changes the chat: only from what the person saw.
    const seen = S.seenLastId(seenId);
    if (seen === undefined) return this.changedElsewhere();
    const conversationId = host.state.conversationId;
    const client = await host.client();
    switch (action) {
      case "edit":
      case "regenerate":
        return this.rewind(id, action, seen);
      case "deleteExchange": {
        if (target.turn === null || host.state.busy) return;
        const turn = target.turn;
        const done = await this.guarded(seen, (expected) => client.deleteTurns({ conversationId, turns: [turn], ...expected }));
        if (done === undefined) return;
        host.update(E.turnsDeleted(host.state, [target.turn]));
        // The first turn's prompt is the automatic title: the panel's tab and the list follow.
        await host.refreshTitle();
        return;
      }
      case "redact": {
        const secret = await vscode.window.showInputBox({
          title: "Redact",
          prompt: 'The text to replace with "[redacted]" everywhere in this message; empty: the whole message.',
          password: true,
        });
        if (secret === undefined) return;
        const content = E.redact(target.content, secret);
        if (content === null) {
          void vscode.window.showInformationMessage("That text is not in this message; nothing changed.");
          return;
        }
        const row = await this.guarded(seen, (expected) => client.editMessage({ conversationId, id, content, ...expected }));
        if (row === undefined) return;
        host.update(E.rowEdited(host.state, row));
        // A redacted first prompt is the automatic title: header, tab and list show it redacted.
        await host.refreshTitle();
        return;
      }
      case "fork": {
        const forkId = newConversationId();
        await client.fork({ conversationId, newConversationId: forkId, throughId: id });
        await host.list.refresh();
        await host.open(forkId);
        return;
      }
    }
  }
}
