"""``chat-history``, the command-line tool for humans: ``main`` (the parser, a command's run),
one module per family of commands (``conversations``, ``search``, ``edits``, ``storage``,
``archive``, ``workspaces``, ``agents``, ``imports``) over what they share (``common``),
``render`` (text for a terminal), ``transfer`` (the export format's own translator, JSONL in and
out), ``progress`` (a progress line on stderr). ``python -m chat_history.cli`` runs it."""
