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
