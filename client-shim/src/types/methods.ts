/**
 * Every custom method of the wire by name, with its params and result types ({@link RequestMap}):
 * a new method is a line in each table here and its types in its family's file.
 */

import type { GetTreeParams, GetTreeResult, SwitchBranchParams, SwitchBranchResult } from "./branches";
import type { ForkParams, ForkResult, ListConversationsParams, ListConversationsResult, UpdateConversationParams, UpdateConversationResult } from "./conversations";
import type { DeleteTurnsParams, DeleteTurnsResult, EditMessageParams, EditMessageResult, TruncateParams, TruncateResult } from "./edits";
import type {
  AppendParams,
  AppendResult,
  ClearParams,
  ClearResult,
  DeleteSummaryParams,
  DeleteSummaryResult,
  FormatParams,
  FormatResult,
  GetParams,
  GetResult,
  GetSummaryParams,
  GetSummaryResult,
  PrepareParams,
  PrepareResult,
  SaveSummaryParams,
  SaveSummaryResult,
} from "./history";
import type { ImportFromParams, ImportFromResult } from "./imports";
import type { ReportProviderErrorParams, ReportProviderErrorResult, SaveCompactionParams, SaveCompactionResult } from "./provider_state";
import type { SearchParams, SearchResult } from "./search";
import type { ReportUsageParams, ReportUsageResult } from "./usage";
import type { ListWorkspacesParams, ListWorkspacesResult, MoveWorkspaceParams, MoveWorkspaceResult } from "./workspaces";

export const Methods = {
  append: "chatHistory/append",
  get: "chatHistory/get",
  format: "chatHistory/format",
  prepare: "chatHistory/prepare",
  saveSummary: "chatHistory/saveSummary",
  getSummary: "chatHistory/getSummary",
  // Version 2: search
  search: "chatHistory/search",
  clear: "chatHistory/clear",
  listConversations: "chatHistory/listConversations",
  // Version 2: conversations and edits
  updateConversation: "chatHistory/updateConversation",
  truncate: "chatHistory/truncate",
  deleteTurns: "chatHistory/deleteTurns",
  editMessage: "chatHistory/editMessage",
  fork: "chatHistory/fork",
  deleteSummary: "chatHistory/deleteSummary",
  // Version 2: calibrated estimates
  reportUsage: "chatHistory/reportUsage",
  // Version 3: workspace identity
  moveWorkspace: "chatHistory/moveWorkspace",
  listWorkspaces: "chatHistory/listWorkspaces",
  // Version 4: replies in flight
  beginReply: "chatHistory/beginReply",
  updateReply: "chatHistory/updateReply",
  endReply: "chatHistory/endReply",
  // Version 4: history from other tools
  importFrom: "chatHistory/importFrom",
  // Version 5: provider state that stays valid
  saveCompaction: "chatHistory/saveCompaction",
  reportProviderError: "chatHistory/reportProviderError",
  // Version 5: conversation trees
  switchBranch: "chatHistory/switchBranch",
  getTree: "chatHistory/getTree",
} as const;
export type Method = (typeof Methods)[keyof typeof Methods];

/** The protocol version this package speaks (`capabilities.experimental.chatHistory.protocolVersion`). */
export const PROTOCOL_VERSION = 5;

/** Params and result type of every request, by method name. */
export interface RequestMap {
  "chatHistory/append": [AppendParams, AppendResult];
  "chatHistory/get": [GetParams, GetResult];
  "chatHistory/format": [FormatParams, FormatResult];
  "chatHistory/prepare": [PrepareParams, PrepareResult];
  "chatHistory/saveSummary": [SaveSummaryParams, SaveSummaryResult];
  "chatHistory/getSummary": [GetSummaryParams, GetSummaryResult];
  "chatHistory/search": [SearchParams, SearchResult];
  "chatHistory/clear": [ClearParams, ClearResult];
  "chatHistory/listConversations": [ListConversationsParams, ListConversationsResult];
  "chatHistory/updateConversation": [UpdateConversationParams, UpdateConversationResult];
  "chatHistory/truncate": [TruncateParams, TruncateResult];
  "chatHistory/deleteTurns": [DeleteTurnsParams, DeleteTurnsResult];
  "chatHistory/editMessage": [EditMessageParams, EditMessageResult];
  "chatHistory/fork": [ForkParams, ForkResult];
  "chatHistory/deleteSummary": [DeleteSummaryParams, DeleteSummaryResult];
  "chatHistory/reportUsage": [ReportUsageParams, ReportUsageResult];
  "chatHistory/moveWorkspace": [MoveWorkspaceParams, MoveWorkspaceResult];
  "chatHistory/listWorkspaces": [ListWorkspacesParams, ListWorkspacesResult];
  "chatHistory/importFrom": [ImportFromParams, ImportFromResult];
  "chatHistory/saveCompaction": [SaveCompactionParams, SaveCompactionResult];
  "chatHistory/reportProviderError": [ReportProviderErrorParams, ReportProviderErrorResult];
  "chatHistory/switchBranch": [SwitchBranchParams, SwitchBranchResult];
  "chatHistory/getTree": [GetTreeParams, GetTreeResult];
}
