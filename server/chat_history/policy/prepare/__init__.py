"""The prepare pipeline, pure (semantics.md "Request-time preparation"): ``context.prepare_rows``
and its steps — the summary standing in and compaction, tool context collapse, the window, the
turn limit and token budget on the stable prefix's grids, recovery — and ``readplan``, how far
back a request reads. Below it, in ``policy``: turns, tokens, the route and budget, calibration,
the orphan sweep (shared with ``format`` and ``reportUsage``)."""
