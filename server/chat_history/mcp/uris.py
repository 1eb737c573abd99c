"""The resources' URIs (docs/mcp.md "Conversations as resources"): how a conversation is named
as an MCP resource, the URI templates that say so, and the strict reading of a URI a client
sends back. No SDK, no store: a URI either names a conversation (its id, the workspace it
claims, the rendering asked for) or is refused with the reason, never echoing it.

- ``chat-history://conversation/{conversationId}``: the conversation as Markdown;
- ``chat-history://conversation/{conversationId}/json``: the same rows as JSON;
- with ``--all-workspaces`` each gains ``?workspace={workspace}`` (ids are only unique within
  a workspace), and one without it is looked up as the tools look up a bare id.

The id and the workspace are percent-encoded whole (RFC 6570 simple and form-style
expansion), so an id holding ``/``, ``?`` or ``#`` is still one path segment."""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote, unquote, urlsplit

import attrs

from chat_history.errors import InvalidParams
from chat_history.model import Key

SCHEME = "chat-history"
HOST = "conversation"
PREFIX = f"{SCHEME}://{HOST}/"
#: The longest conversation id read, in a URI or a tool's argument (the wire's MAX_ID_CHARS).
ID_CHARS = 256
#: The longest URI read (a 256-character id and a long workspace URI, each encoded, fit).
MAX_URI_CHARS = 4_096
#: The longest workspace a URI may claim (a workspace identity is a normalized URI).
MAX_WORKSPACE_CHARS = 2_048
MARKDOWN = "text/markdown"
JSON = "application/json"

Rendering = Literal["markdown", "json"]


@attrs.frozen
class Target:
    """What a URI names: a conversation id, the workspace it claims (None: none said), and the
    rendering asked for."""

    conversation: str
    workspace: str | None
    rendering: Rendering

    @property
    def mime_type(self) -> str:
        return JSON if self.rendering == "json" else MARKDOWN


class NotOurs(Exception):
    """A well-formed URI that names nothing this server serves (another scheme or host)."""


def conversation_uri(key: Key, *, every_workspace: bool, rendering: Rendering = "markdown") -> str:
    """The URI of ``key``'s conversation; with ``every_workspace`` it names the workspace too."""
    uri = PREFIX + quote(key.conversation, safe="")
    if rendering == "json":
        uri += "/json"
    if every_workspace:
        uri += "?workspace=" + quote(key.workspace, safe="")
    return uri


def templates(*, every_workspace: bool) -> list[tuple[str, str, str, str]]:
    """The URI templates (RFC 6570) as ``resources/templates/list`` answers them: (template,
    name, title, MIME type)."""
    query = "{?workspace}" if every_workspace else ""
    return [
        (
            f"{PREFIX}{{conversationId}}{query}",
            "conversation",
            "A past conversation (Markdown)",
            MARKDOWN,
        ),
        (
            f"{PREFIX}{{conversationId}}/json{query}",
            "conversation-json",
            "A past conversation (JSON: the rows as read_conversation answers them)",
            JSON,
        ),
    ]


def _decoded(text: str, what: str) -> str:
    """``text`` percent-decoded as UTF-8; a malformed escape or byte sequence is refused."""
    escapes = text.split("%")[1:]
    if any(len(e) < 2 or not all(c in "0123456789abcdefABCDEF" for c in e[:2]) for e in escapes):
        raise InvalidParams("uri", f"the {what} holds a malformed percent escape")
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidParams("uri", f"the {what} is not percent-encoded UTF-8") from None


def parse(uri: str) -> Target:
    """What ``uri`` names. Raises InvalidParams ``uri`` (malformed: the reason, never the URI)
    or NotOurs (well-formed, another scheme or host)."""
    if len(uri) > MAX_URI_CHARS:
        raise InvalidParams("uri", f"must be at most {MAX_URI_CHARS} characters")
    if any(ord(c) < 0x21 or 0xD800 <= ord(c) <= 0xDFFF for c in uri):
        raise InvalidParams("uri", "must hold no spaces, control characters or lone surrogates")
    try:
        parts = urlsplit(uri)
    except ValueError:
        raise InvalidParams("uri", "is not a URI") from None
    if parts.scheme != SCHEME or parts.netloc.lower() != HOST:
        if not parts.scheme:
            raise InvalidParams("uri", "is not an absolute URI")
        raise NotOurs
    if "#" in uri:
        raise InvalidParams("uri", "must have no fragment")
    segments = parts.path.split("/")[1:]
    if len(segments) == 1:
        rendering: Rendering = "markdown"
    elif len(segments) == 2 and segments[1] == "json":
        rendering = "json"
    else:
        raise InvalidParams(
            "uri", f"must be {PREFIX}{{conversationId}} or {PREFIX}{{conversationId}}/json"
        )
    conversation = _decoded(segments[0], "conversation id")
    if not conversation:
        raise InvalidParams("uri", "names no conversation id")
    if len(conversation) > ID_CHARS:
        raise InvalidParams("uri", f"the conversation id must be at most {ID_CHARS} characters")
    workspace: str | None = None
    if parts.query or uri.endswith("?"):
        fields = parts.query.split("&")
        if len(fields) != 1 or not fields[0].startswith("workspace="):
            raise InvalidParams("uri", "takes one query parameter only: workspace")
        workspace = _decoded(fields[0].removeprefix("workspace="), "workspace")
        if not workspace or len(workspace) > MAX_WORKSPACE_CHARS:
            raise InvalidParams(
                "uri", f"the workspace must be 1 to {MAX_WORKSPACE_CHARS} characters"
            )
    return Target(conversation, workspace, rendering)
