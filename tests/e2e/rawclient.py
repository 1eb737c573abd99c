"""The package's own stdio client, for what a polite LSP client will not send (requests before
initialize, broken frames) and for several processes at once."""

from chat_history.client import RpcError, StdioClient

__all__ = ["RpcError", "StdioClient"]
