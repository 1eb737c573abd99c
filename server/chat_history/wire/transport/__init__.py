"""The wire's transport, below the methods: stdio frames read (``framing``, ``intake``, ``scan``)
and written (``frames``), the pygls adapter (``lsp_adapter``), memory given back
(``memory``) and the settings barrier (``barrier``). No method, no result translator here."""
