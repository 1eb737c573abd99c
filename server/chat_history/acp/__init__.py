"""The ACP recording proxy (protocol.md "Version 4" → ACP sessions): ``chat-history acp --
AGENT …`` stands between an editor and an ACP agent on stdio, passes every message through,
records each session into the store while it streams, and serves the session methods the agent
lacks from the store.

- ``lines``: newline-delimited JSON-RPC read defensively (garbage, over-long lines).
- ``rows``: pure rules: ACP updates coalesced into rows, rows replayed as updates, the context
  block of an earlier conversation.
- ``recorder``: a session's prompts and updates written through the manager while they stream.
- ``sessions``: ``session/list``, ``load``, ``resume``, ``delete``, ``fork``, ``close`` served from
  the store, and the capabilities the proxy adds to the agent's ``initialize`` answer.
- ``relay``: the two pipes, ids kept apart, session ids bound, the agent restarted after a crash.
"""
