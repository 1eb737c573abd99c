"""The wire: everything that speaks JSON-RPC and camelCase. ``server`` (pygls lifecycle and
one-line handlers), ``protocol`` (wire types, the one converter, the checks and the table from
domain field ids to wire paths), ``framing`` (the stdio reader), ``frames`` (answers cut into
chunks), ``lsp_adapter`` (pygls privates in one place), ``barrier`` (settings pulled before
requests run)."""
