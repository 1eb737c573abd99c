"""The change watch's refresh folded into the look (issue 35 item 15): while another window
writes to the watched workspace, a read section's look (``marks.Looks.statement(fold=True)``)
reads, with each change mark of that workspace, the marked conversation's fingerprint
(policy.changes) and its newest rows' ids and tokens, in the same statement: the watch's
``refresh`` after another window's commit is then answered from here, without a statement of
its own.

- **What is remembered.** Per conversation of the watched workspace, what the newest look that
  saw its mark read (``Seen``): the fingerprint (None: it does not exist) and up to ``WINDOW``
  newest rows, from which the growth past any id among them is counted (``Seen.growth``). A
  look that saw its mark without folding (a snapshot's, a write's) forgets it; this
  connection's own commit marks it ``own`` (the watch re-read it before that commit). What is
  not here, or whose growth the rows do not cover, the refresh reads (``readings.REFRESH``).
- **When a look folds.** For ``FOLD_SECONDS`` after a look found marks of the watched
  workspace: a quiet workspace's looks stay the plain statement (what the fold costs to plan,
  ~0.4 ms a look on the bench's loaded machine, is paid only while another window writes; one
  that writes less often than that pays the refresh statement at each of its commits instead).
  Each marked conversation is looked up by its whole key (the mark's owner): nothing in
  proportion to the workspace."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from chat_history.model import Key
from chat_history.policy.changes import Fingerprint, Growth

#: How long after a look found marks of the watched workspace the read sections' looks fold.
FOLD_SECONDS = 2.0
#: The newest rows read with each marked conversation (the growth of an append or a turn).
WINDOW = 8
#: The conversations remembered at most (past it, all are forgotten: the refresh reads them).
MAX_SEEN = 4096

_KEY = "m.owner = c.owner AND m.workspace = c.workspace AND m.conversation = c.conversation"
#: What the look's marks lateral (alias ``k``: the mark) aggregates with ``json_agg`` when it
#: folds: the marked conversation's fingerprint fields and newest rows as one JSON array (NULL
#: for a mark of another workspace or of a conversation that does not exist). Scalar
#: subqueries, not joins: fewer plans for the planner to weigh, each a lookup by the whole key.
FOLD = f"""(SELECT json_build_array(
    (SELECT MIN(m.id) FROM messages m WHERE {_KEY}),
    c.message_count, c.tokens, c.last_activity, c.title, c.metadata,
    (SELECT m.updated_at FROM summaries m WHERE {_KEY}),
    (SELECT m.id * 4294967296 + m.revision FROM replies m WHERE {_KEY}),
    (SELECT json_agg(json_build_array(t.id, t.tokens)) FROM (SELECT m.id, m.tokens
     FROM messages m WHERE {_KEY} ORDER BY m.id DESC LIMIT {WINDOW}) AS t), c.switches)
  FROM conversations c WHERE k.workspace = %s AND c.owner = k.owner
  AND c.workspace = k.workspace AND c.conversation = k.conversation)"""


class Seen(NamedTuple):
    """A marked conversation as the newest look that saw its mark read it."""

    #: None: it does not exist
    fingerprint: Fingerprint | None
    #: its newest rows' (id, tokens), newest first, at most ``WINDOW``
    newest: tuple[tuple[int, int], ...] = ()
    #: this connection's own commit was its newest mark (the watch knows it as it is)
    own: bool = False

    def growth(self, after_id: int) -> Growth | None:
        """Its rows newer than ``after_id`` (None: more of them than ``newest`` holds)."""
        newer = [tokens for row_id, tokens in self.newest if row_id > after_id]
        if len(newer) == len(self.newest) == WINDOW:
            return None
        return Growth(len(newer), sum(newer))


def seen(found: Any) -> Seen:
    """The ``Seen`` of one element of the look's ``fps`` (None: the conversation is gone)."""
    if found is None:
        return Seen(None)
    first_id, count, tokens, activity, title, metadata, summary_at, reply, rows, branch = found
    newest = tuple(sorted(((int(i), int(t)) for i, t in rows or ()), reverse=True))
    fingerprint = Fingerprint(
        newest[0][0] if newest else None,
        first_id,
        count,
        tokens,
        activity,
        title,
        metadata,
        summary_at,
        reply,
        branch,
    )
    return Seen(fingerprint, newest)


class Folded:
    """What the looks read of the watched workspace's marked conversations (``Seen``)."""

    def __init__(self) -> None:
        #: the watched workspace (``watch``); None: nothing is kept
        self.workspace: str | None = None
        self._seen: dict[str, Seen] = {}

    def watch(self, workspace: str | None) -> None:
        if workspace != self.workspace:
            self._seen.clear()
            self.workspace = workspace

    def clear(self) -> None:
        self._seen.clear()

    def take(self, keys: Sequence[Key], fingerprints: Sequence[Any] | None) -> bool:
        """A look saw the marks of ``keys`` (with ``fingerprints``, each key's element, when it
        folded): remember what it read, forget what it did not. Whether any is watched."""
        watched = False
        for n, key in enumerate(keys):
            if key.workspace != self.workspace:
                continue
            watched = True
            if fingerprints is None:
                self._seen.pop(key.conversation, None)
            else:
                self._seen[key.conversation] = seen(fingerprints[n])
        if len(self._seen) > MAX_SEEN:
            self._seen.clear()
        return watched

    def own(self, keys: Collection[Key]) -> None:
        """This connection's commit marked ``keys`` (and no other commit came between)."""
        for key in keys:
            if key.workspace == self.workspace:
                self._seen[key.conversation] = Seen(None, own=True)

    def get(self, workspace: str, conversation: str) -> Seen | None:
        if workspace != self.workspace:
            return None
        return self._seen.get(conversation)
