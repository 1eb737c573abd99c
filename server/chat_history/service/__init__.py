"""The service layer: what every handler, the CLI, MCP and ACP call. ``manager.py`` is the core
(the store under one lock, the settings, the write and read helpers); each family of methods has
its module of operations taking the manager first (``history``, ``conversations``, ``edits``,
``replies``, ``workspaces``, ``search``, ``usage``, ``import_writes``), beside prepare's read
orchestration, storage retention, the change watch, other tools' imports and git folders. It
composes the pure policy, the providers and the store; it imports no pygls."""
