/**
 * The panel's offer of its history to agents (docs/mcp.md): where VS Code has the MCP server
 * definition API (`vscode.lm.registerMcpServerDefinitionProvider`, VS Code 1.101 and later) the
 * recall server is registered, so that agent mode lists it; everywhere, the command "Copy MCP
 * Server Configuration" puts the configuration for other agents on the clipboard. Older editors
 * (code-server 4.100 is VS Code 1.100) lack the API: nothing is registered and nothing breaks.
 */

import * as vscode from "vscode";
import { mcpConfiguration, mcpLaunch, type McpLaunch } from "./mcp";
import type { ServerLauncher } from "./launcher";

/** The provider id, the same as `contributes.mcpServerDefinitionProviders[0].id`. */
export const MCP_PROVIDER = "chatPanel.history";

interface McpApi {
  registerMcpServerDefinitionProvider(id: string, provider: unknown): vscode.Disposable;
}
type StdioDefinition = new (label: string, command: string, args: string[], env?: Record<string, string>, version?: string) => unknown;

async function launchOf(launcher: ServerLauncher, storagePath: string): Promise<McpLaunch> {
  return mcpLaunch(await launcher.find(), launcher.storageArgs(storagePath));
}

/** Registers the provider where the API exists; whether it did. */
export function registerMcpServer(context: vscode.ExtensionContext, launcher: ServerLauncher): boolean {
  const lm = (vscode as unknown as { lm?: Partial<McpApi> }).lm;
  const Definition = (vscode as unknown as { McpStdioServerDefinition?: StdioDefinition }).McpStdioServerDefinition;
  if (typeof lm?.registerMcpServerDefinitionProvider !== "function" || Definition === undefined) {
    launcher.output.info("MCP: this editor has no MCP server definition API; use Copy MCP Server Configuration");
    return false;
  }
  const provider = {
    provideMcpServerDefinitions: async () => {
      const launch = await launchOf(launcher, context.globalStorageUri.fsPath);
      return [new Definition("Chat History", launch.command, launch.args, {}, context.extension.packageJSON.version)];
    },
  };
  try {
    context.subscriptions.push(lm.registerMcpServerDefinitionProvider(MCP_PROVIDER, provider));
  } catch (error) {
    // VS Code 1.100 (code-server 4.100) has the function but wants another contribution point
    // ("contributes.modelContextServerCollections") and throws: the panel goes on without it.
    launcher.output.info(`MCP: this editor refused the MCP server definition (${(error as Error).message}); use Copy MCP Server Configuration`);
    return false;
  }
  launcher.output.info("MCP: the recall server is offered to the editor's agent");
  return true;
}

/** "Copy MCP Server Configuration": the configuration of this panel's server for other agents. */
export async function copyMcpConfiguration(context: vscode.ExtensionContext, launcher: ServerLauncher): Promise<void> {
  const launch = await launchOf(launcher, context.globalStorageUri.fsPath);
  await vscode.env.clipboard.writeText(mcpConfiguration(launch));
  void vscode.window.showInformationMessage(
    "Copied the MCP server configuration of your chat history (VS Code, Claude Code, Cline, Cursor and Zed forms). Paste the one your agent reads.",
  );
}
