"""The service layer: ``ChatHistoryManager`` (``manager.py``), the service API every handler and
the CLI call, and the modules it composes — conversations and edits, prepare's read
orchestration, storage retention, the change watch, workspace identity and git folders. It
composes the pure policy, the providers and the store; it imports no pygls."""
