"""The wire: everything that speaks JSON-RPC and camelCase. At its base the translators:
``protocol`` (the one converter, KeyParams, the result translators, the table from domain field
ids to wire paths), ``checks``, ``messages``, ``reports`` and ``codes`` (domain errors as JSON-RPC
errors). Above them ``transport/`` (stdio frames read and written, the pygls adapter, memory, the
settings barrier) and ``methods/`` (one module per family); at the top the pygls server:
``session`` (its state), ``lifecycle`` (initialize to shutdown) and ``server`` (the one request
helper and ``register``)."""
