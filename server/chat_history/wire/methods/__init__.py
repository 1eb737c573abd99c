"""The wire's methods, one module per family: its params, checks, translators and handlers,
ending with its ``METHODS`` (``base.Method``), which ``wire.server`` registers."""
