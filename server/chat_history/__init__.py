"""chat-history-server: conversation history for editor chat panels, served over JSON-RPC stdio."""

__version__ = "0.1.0"
