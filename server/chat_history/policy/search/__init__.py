"""Full-text search rules (protocol.md "Version 2" → Search), pure: ``folding`` (case- and
accent-insensitive text that maps back), ``query`` (the grammar and the terms a row must hold),
``scoring`` (relevance), ``snippets`` (snippets with code-point highlights), ``fts`` (the FTS5
MATCH expression for a trigram index over folded text) and ``rank`` (a search's answer)."""
