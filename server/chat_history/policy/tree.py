"""Conversation trees (protocol.md "Version 5" → Conversation trees), pure: the rows as nodes
(id, parent, activity), the inactive branches off the active path, the path a switch goes to,
the siblings a row of the active path shows, and retention's rules on branches. No I/O: the
store hands the nodes in (``store.tree``).

A row's parent always has a lower id (a row is written after the row it follows, and a row
whose parent goes takes an ancestor), so a path in id order is in path order and a subtree is
found walking the nodes newest first."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from chat_history.model import Siblings


@attrs.frozen
class Node:
    """A row as the tree's rules weigh it (no content)."""

    id: int
    parent_id: int | None
    turn: int
    role: str
    tokens: int
    timestamp: int
    #: when it stopped being the active leaf (None: never was one, or still is)
    active_at: int | None
    #: on the active path
    active: bool


@attrs.frozen
class Branch:
    """An inactive branch: the subtree of the row ``head``, which is off the active path while
    its parent ``parent`` is on it (None: ``head`` is a first row)."""

    head: int
    parent: int | None
    rows: int
    #: its newest row's timestamp
    newest: int
    #: its most recent leaf activity (None: no leaf of it was ever the active leaf)
    activity: int | None

    @property
    def last_active(self) -> int:
        """When it was last active: its leaves' activity, else its newest row's time."""
        return self.activity if self.activity is not None else self.newest


def inactive_branches(parked: Sequence[Node]) -> list[Branch]:
    """The branches the rows off the active path (``parked``, in id order) form: one per row
    whose parent is on the active path (or that is a first row), with its subtree's figures."""
    ids = {node.id for node in parked}
    rows: dict[int, int] = {}
    newest: dict[int, int] = {}
    activity: dict[int, int | None] = {}
    for node in reversed(parked):  # children first
        rows[node.id] = rows.get(node.id, 0) + 1
        newest[node.id] = max(newest.get(node.id, node.timestamp), node.timestamp)
        activity[node.id] = _later(activity.get(node.id), node.active_at)
        parent = node.parent_id
        if parent is not None and parent in ids:
            rows[parent] = rows.get(parent, 0) + rows[node.id]
            newest[parent] = max(newest.get(parent, newest[node.id]), newest[node.id])
            activity[parent] = _later(activity.get(parent), activity[node.id])
    return [
        Branch(node.id, node.parent_id, rows[node.id], newest[node.id], activity[node.id])
        for node in parked
        if node.parent_id is None or node.parent_id not in ids
    ]


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def subtree(nodes: Sequence[Node], top: int) -> list[int]:
    """The ids of ``top`` and every row below it among ``nodes`` (in id order), ascending."""
    inside = {top}
    for node in nodes:
        if node.parent_id is not None and node.parent_id in inside:
            inside.add(node.id)
    return sorted(inside)


def children(nodes: Iterable[Node]) -> dict[int | None, list[int]]:
    """Parent id (None: first rows) → its children's ids, ascending."""
    found: dict[int | None, list[int]] = {}
    for node in sorted(nodes, key=lambda n: n.id):
        found.setdefault(node.parent_id, []).append(node.id)
    return found


def _recency(nodes: Sequence[Node], active_leaf: int | None) -> dict[int, float]:
    """Each node's subtree's most recent leaf activity (the active leaf: now, the most recent of
    all; -inf: none of its leaves was ever active)."""
    by_id = {node.id: node for node in nodes}
    recency: dict[int, float] = {}
    for node in sorted(nodes, key=lambda n: n.id, reverse=True):
        own = (
            float("inf")
            if node.id == active_leaf
            else float(node.active_at if node.active_at is not None else float("-inf"))
        )
        recency[node.id] = max(recency.get(node.id, float("-inf")), own)
        parent = node.parent_id
        if parent is not None and parent in by_id:
            recency[parent] = max(recency.get(parent, float("-inf")), recency[node.id])
    return recency


def descend(nodes: Sequence[Node], start: int | None, active_leaf: int | None) -> list[int]:
    """The rows ``switchBranch`` follows from ``start`` (None: from above the first rows) down to
    a leaf: at each row with several children, the child whose subtree holds the leaf that was
    active most recently, else the newest child. ``start`` itself is not included."""
    below = children(nodes)
    recency = _recency(nodes, active_leaf)
    path: list[int] = []
    at = start
    while below.get(at):
        options = below[at]
        at = max(options, key=lambda child: (recency.get(child, float("-inf")), child))
        path.append(at)
    return path


def path_to(nodes: Mapping[int, Node], row_id: int) -> list[int]:
    """The ids from a first row down to ``row_id`` (``nodes`` by id)."""
    path: list[int] = []
    at: int | None = row_id
    while at is not None:
        path.append(at)
        at = nodes[at].parent_id
    return path[::-1]


@attrs.frozen
class Switch:
    """A new active path against the old: the last row both share (None: none), and the rows
    that come onto it below that, in order. Its leaf is the last of ``arriving`` (or ``fork``)."""

    fork: int | None
    arriving: tuple[int, ...]

    @property
    def leaf(self) -> int | None:
        return self.arriving[-1] if self.arriving else self.fork


def switch_to(path: Sequence[int], nodes: Mapping[int, Node]) -> Switch:
    """What makes ``path`` (ids from a first row down) the active path: it shares the active
    path's rows up to its last active one."""
    fork: int | None = None
    arriving: list[int] = []
    for row_id in path:
        if nodes[row_id].active and not arriving:
            fork = row_id
        else:
            arriving.append(row_id)
    return Switch(fork, tuple(arriving))


def after_switch(
    before: Sequence[Branch], switch: Switch, moved: Sequence[Node], left: Branch | None
) -> list[Branch]:
    """The inactive branches once ``switch``'s path is the active path, from those ``before``
    and the rows that moved only (what ``inactive_branches`` over every parked row finds): the
    branch its arriving rows came from (``moved``: that branch's rows, in id order) gives way to
    the subtrees off them; the rows that left the active path (``left``: their own figures, the
    first of them its head; None: none left) become one branch with every branch that started
    below the fork. By head id."""
    fork = switch.fork
    came = switch.arriving[0] if switch.arriving else None

    def below_fork(branch: Branch) -> bool:
        return (
            left is not None
            and branch.parent is not None
            and (fork is None or branch.parent > fork)
        )

    found = [b for b in before if b.head != came and not below_fork(b)]
    if left is not None:
        joined = [left, *(b for b in before if below_fork(b))]
        activity: int | None = None
        for branch in joined:
            activity = _later(activity, branch.activity)
        found.append(
            Branch(
                left.head,
                fork,
                sum(b.rows for b in joined),
                max(b.newest for b in joined),
                activity,
            )
        )
    arriving = set(switch.arriving)
    found.extend(inactive_branches([node for node in moved if node.id not in arriving]))
    return sorted(found, key=lambda branch: branch.head)


def siblings(
    rows: Iterable[tuple[int, int | None]], branches: Sequence[Branch]
) -> dict[int, Siblings]:
    """The siblings of the active path's ``rows`` (id, parent id) that have any: the heads of the
    inactive branches with the same parent (first rows: the other first rows), oldest first."""
    heads: dict[int | None, list[int]] = {}
    for branch in branches:
        heads.setdefault(branch.parent, []).append(branch.head)
    if not heads:
        return {}
    found: dict[int, Siblings] = {}
    for row_id, parent in rows:
        others = heads.get(parent)
        if others:
            ids = tuple(sorted((row_id, *others)))
            found[row_id] = Siblings(ids.index(row_id), ids)
    return found


@attrs.frozen
class BranchPlan:
    """The inactive branches retention deletes: by age, then past the limit on their number."""

    by_age: tuple[int, ...]
    by_count: tuple[int, ...]

    @property
    def heads(self) -> tuple[int, ...]:
        return self.by_age + self.by_count


def plan_branches(
    branches: Sequence[Branch], *, max_branches: int, cutoff: int | None
) -> BranchPlan:
    """The branches whose newest row is older than ``cutoff`` (None: the age rule is off), then,
    while more than ``max_branches`` are left, the least recently active."""
    old = [b for b in branches if cutoff is not None and b.newest < cutoff]
    left = sorted((b for b in branches if b not in old), key=lambda b: (b.last_active, b.head))
    over = max(0, len(left) - max_branches)
    return BranchPlan(tuple(b.head for b in old), tuple(b.head for b in left[:over]))


def branches_due(count: int, expiry: int | None, *, max_branches: int, cutoff: int | None) -> bool:
    """The check on a conversation's record: could a branch rule delete something?"""
    if count > max_branches:
        return True
    return count > 0 and cutoff is not None and expiry is not None and expiry < cutoff
