"""The MCP recall server (protocol.md "Version 4" → Agents recall their history): agents search,
list and read their own workspace's past conversations over the Model Context Protocol.
``tools.py`` holds the three tools over ChatHistoryManager (no SDK); ``server.py`` serves them on
stdio with the official MCP SDK. Imported only by ``chat-history mcp``."""
