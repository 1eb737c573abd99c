"""Where provider state was minted and where a request goes, in one spelling (protocol.md
"Version 5" → Provider state that stays valid): each kind's public API, endpoints compared as
URLs, an origin filled from an alias of ``chatHistory.providers`` or a bare kind, and the
origin an import stamps. Which state may go where is ``providers.state_rules``."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from chat_history.errors import InvalidParams
from chat_history.model import Origin
from chat_history.settings import PROVIDER_KINDS, ProviderAlias

#: Each kind's public API: the endpoint of a bare kind, and of an origin or alias that names
#: none. Bedrock is regional and names none of its own: its label is the region boto3's
#: documentation starts from, the same on both sides of every comparison.
PUBLIC_ENDPOINTS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://localhost:11434",
    "mistral": "https://api.mistral.ai",
    "bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com",
    "cohere": "https://api.cohere.com",
}
assert tuple(PUBLIC_ENDPOINTS) == PROVIDER_KINDS, "one public endpoint per provider kind"

#: The scope an import stamps: ``import:<source>`` (the tool's account, not the user's).
IMPORT_SCOPE = "import:{source}"


def endpoint_of(kind: str, endpoint: str | None) -> str:
    """``endpoint`` as compared (scheme and host in lower case, no trailing slash), or the
    kind's public API when it is None or blank. Text that is not a URL is kept as written
    (an endpoint is a label the client chooses)."""
    if endpoint is None or not endpoint.strip():
        return PUBLIC_ENDPOINTS[kind]
    text = endpoint.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return text.rstrip("/")
    if not parts.scheme or not parts.netloc:
        return text.rstrip("/")
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def origin(
    kind: str, model: str | None = None, endpoint: str | None = None, scope: str | None = None
) -> Origin:
    """An origin with its endpoint in the compared spelling (the kind's public API when none)."""
    return Origin(provider=kind, model=model, endpoint=endpoint_of(kind, endpoint), scope=scope)


def alias_origin(name: str, aliases: Mapping[str, ProviderAlias], field: str) -> Origin:
    """The origin a client names by the alias (or bare kind) it sent to: the alias's kind,
    model, endpoint and ``stateScope``; a bare kind has its public API and no scope. An alias
    wins over a kind of the same name, as for a request's route. InvalidParams ``field`` for a
    name that is neither."""
    alias = aliases.get(name)
    if alias is not None:
        return origin(alias.provider, alias.model, alias.endpoint, alias.state_scope)
    if name in PROVIDER_KINDS:
        return origin(name)
    raise InvalidParams(field, "names no alias of chatHistory.providers nor a provider kind")


def import_origin(source: str, kind: str, model: str | None) -> Origin:
    """The origin of a row another tool wrote: the tool's provider and model at the kind's
    public API, in scope ``import:<source>``, so its state goes back only where that scope is
    named."""
    return origin(kind, model, None, IMPORT_SCOPE.format(source=source))
