"""Provider formatting: one pure module per provider kind, turning stored rows into the body
fields of that provider's request; ``registry`` routes a kind or alias to its module."""

from chat_history.providers.registry import KINDS, format_body

__all__ = ["KINDS", "format_body"]
