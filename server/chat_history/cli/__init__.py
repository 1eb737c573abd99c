"""``chat-history``, the command-line tool for humans: ``main`` (the parser and commands),
``render`` (text for a terminal), ``transfer`` (the export format's own translator, JSONL in and
out), ``progress`` (a progress line on stderr). ``python -m chat_history.cli`` runs it."""
