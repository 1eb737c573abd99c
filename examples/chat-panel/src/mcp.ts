/**
 * The MCP recall server (`chat-history mcp`, docs/mcp.md) as the panel offers it to agents: the
 * launch of the same server this panel runs (its command and CLI arguments, the same history),
 * and the configuration other agents need, as text to paste. No VS Code code here.
 */

export interface McpLaunch {
  command: string;
  args: string[];
}

/** The server this panel runs, as the launch finder describes it (`chat-history-client/launch`). */
export interface CliCommand {
  command: string;
  cliArgs: string[];
}

/** `chat-history [storage] mcp`, run as the panel runs its CLI; `storageArgs` name its history. */
export function mcpLaunch(server: CliCommand, storageArgs: string[]): McpLaunch {
  return { command: server.command, args: [...server.cliArgs, ...storageArgs, "mcp"] };
}

/**
 * What "Copy MCP Server Configuration" puts on the clipboard: the VS Code `mcp.json` entry and
 * the `mcpServers` entry that Claude Code, Cline and Cursor read (Zed and Continue name the same
 * command and arguments; docs/mcp.md).
 */
export function mcpConfiguration(launch: McpLaunch): string {
  const server = { command: launch.command, args: launch.args };
  const text = {
    "VS Code (.vscode/mcp.json)": { servers: { "chat-history": { type: "stdio", ...server } } },
    "Claude Code, Cline, Cursor (mcpServers)": { mcpServers: { "chat-history": server } },
    "Zed (settings.json)": { context_servers: { "chat-history": { source: "custom", ...server } } },
  };
  return JSON.stringify(text, null, 2) + "\n";
}
