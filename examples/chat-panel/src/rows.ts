/**
 * Rules about the rows on screen that both the extension and the webview apply (the webview
 * bundle imports only this from the panel's modules: no shim, no `vscode`).
 */

/** The newest stored row of `rows` (null: none stored): what a rewind expects to be the last. */
export function newestStoredId(rows: readonly { id: number | null }[]): number | null {
  let newest: number | null = null;
  for (const row of rows) if (row.id !== null && (newest === null || row.id > newest)) newest = row.id;
  return newest;
}

/**
 * The newest stored row the person could see, for a click to carry as its `expectedLastId`. A
 * view drawn is not yet seen: the page may be busy (a long reply laid out, a collection) and the
 * screen still shows the frame before it, so a view counts once a frame after it was painted
 * ({@link painted}, two animation frames after drawing it). A click by pointer carries what had
 * been seen when its button was pressed; a click by key, what is seen when it is handled.
 */
export class SeenRows {
  /** The newest stored row of the last view painted (undefined: none painted yet). */
  private seen: number | null | undefined;
  private atPress: number | null | undefined;

  /** A view whose newest stored row is `lastId` was painted. */
  painted(lastId: number | null): void {
    this.seen = lastId;
  }

  /** A pointer was pressed (a click may follow). */
  pressed(): void {
    this.atPress = this.seen;
  }

  /**
   * For a click (`byPointer`: pressed with a pointer, not a key): the newest row the person had
   * seen; undefined when no view was painted yet (the click acts on nothing).
   */
  clicked(byPointer: boolean): number | null | undefined {
    const seen = byPointer && this.atPress !== undefined ? this.atPress : this.seen;
    this.atPress = undefined;
    return seen;
  }
}
