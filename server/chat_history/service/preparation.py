"""``prepare``'s read orchestration, beside ``conversations`` and ``storage_retention``: the
read plan (``policy.prepare.readplan``) carried out in one snapshot, the options handed to the pure
``policy.prepare.context.prepare_rows``, and its result formatted for the route. No SQL and no lock
here: ``history.prepare`` calls ``prepare_in`` in a snapshot taken after retention, under the
manager's lock.

Public entries: ``request_options`` (the one wiring of a request's ``RequestOptions``),
``request_rows`` (what a request reads), ``prepare_in`` and ``prepared_request``."""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Sequence

import attrs

from chat_history.model import Key, Message, NativeCompaction, StoredMessage, Summary, ToolSpec
from chat_history.policy.budget import Route, effective_budget
from chat_history.policy.calibration import UNCALIBRATED, Calibration, calibration_of, key_of
from chat_history.policy.prepare import readplan
from chat_history.policy.prepare.compaction import (
    SUMMARY_HEADER,
    Proposal,
    honoured_coverage,
    note_of,
)
from chat_history.policy.prepare.context import prepare_rows
from chat_history.policy.prepare.request import Prepared, RequestOptions, RequestTrim
from chat_history.policy.prepare.window import OmittedTurns, OmittedTurnsKept
from chat_history.providers import continuation, format_body, native_compaction
from chat_history.providers.state_rules import Target, compaction_sent
from chat_history.service.body_memo import BodyMemo
from chat_history.settings import Settings
from chat_history.store import Reading
from chat_history.store.tree_section import TreeReading

#: What a request reads: the rows to send, the turns left unread (None: every row was read),
#: and the conversation's summary.
RequestRows = tuple[list[StoredMessage], OmittedTurns | None, Summary | None]


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """``format``: the whole history as the provider's body; ``cache_key`` is the same for every
    request of the conversation (providers.cache_points)."""

    provider: str
    model: str | None
    body: dict[str, object]
    cache_key: str


@attrs.frozen(kw_only=True)
class CompactionProposal:
    """``PreparedRequest.compaction``: send ``request`` to the model and save its reply with
    ``save_summary(..., covers_through_id=through_id)``; it then stands in for
    ``covered_turns`` turns. The estimates are of ``request`` (calibrated, and not)."""

    through_id: int
    covered_turns: int
    estimated_tokens: int
    raw_estimated_tokens: int
    request: ProviderRequest


@attrs.frozen(kw_only=True)
class PreparedRequest:
    """``prepare``: the body to send, with what was estimated, trimmed, collapsed and
    compacted, the calibration its estimates used and a compaction proposal (or None).
    ``estimated_tokens`` and the figures of ``trimmed`` are calibrated;
    ``raw_estimated_tokens`` is not (what a client reports back with ``report_usage``)."""

    provider: str
    model: str | None
    body: dict[str, object]
    cache_key: str
    estimated_tokens: int
    budget: int | None
    context_window: int | None
    trimmed: RequestTrim | None
    collapsed_tool_rows: int
    collapsed_turns: int
    compaction: CompactionProposal | None
    compacted_turns: int
    compacted_messages: int
    raw_estimated_tokens: int
    calibration: Calibration
    #: with ``continue_id``: the trailing whitespace cut from the reply (providers.continuation)
    continue_trimmed: str | None = None


@attrs.frozen(kw_only=True)
class PrepareOptions:
    """What one ``prepare`` asks: the route (None: the active provider, its default model),
    the caller's tools, tokens it will add, overflow recovery, its own keepToolContextTurns."""

    provider: str | None = None
    model: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    extra_tokens: int = 0
    overflow_recovery: bool = False
    keep_tool_context_turns: int | None = None
    #: the interrupted newest row the body continues (protocol.md "Version 4")
    continue_id: int | None = None


def request_options(
    settings: Settings,
    route: Route,
    options: PrepareOptions,
    *,
    summary: str | Summary | None,
    calibration: Calibration = UNCALIBRATED,
    propose: bool = True,
) -> RequestOptions:
    """The ``RequestOptions`` one ``prepare`` hands ``prepare_rows`` (with the compaction
    proposal the settings call for, unless not ``propose``), from the caller's options, the
    stored summary and the route's calibration."""
    return RequestOptions(
        settings=settings.context,
        route=route,
        summary=summary,
        tools=options.tools,
        extra_tokens=options.extra_tokens,
        overflow_recovery=options.overflow_recovery,
        keep_tool_context_turns=options.keep_tool_context_turns,
        calibration=calibration,
        propose_compaction=propose,
    )


@attrs.frozen
class StandingIn:
    """What stands in for a request's oldest turns: the summary ``prepare_rows`` is given (the
    stored one, or a native compaction's stand-in), and the native compaction whose items
    replace it in the body (None: the summary is sent as itself)."""

    summary: Summary | None
    native: NativeCompaction | None = None

    def replaced_at(self, rows: Sequence[Message]) -> int | None:
        """When what stands in the body ``rows`` make was saved (None: nothing stands in):
        provider state bound to the conversation's prefix stays out of rows stored before."""
        note = note_of(rows)
        if self.summary is None or note is None or SUMMARY_HEADER not in note.content:
            return None
        return self.summary.updated_at

    def items(self) -> native_compaction.Native | None:
        """The native compaction's items and the stand-in text they replace."""
        if self.native is None or self.summary is None:
            return None
        return native_compaction.Native(self.summary.summary, self.native.items)


def standing_in(tx: Reading, key: Key, route: Route) -> StandingIn:
    """What stands in for ``route``'s oldest turns: the native compaction where its items go
    (``state_rules.compaction_sent``), else the stored summary (protocol.md "Version 5" →
    Native compaction)."""
    summary = tx.summary(key)
    if summary is not None and not _on_this_path(tx, key, summary.covers_through_id):
        summary = None
    native = tx.compaction(key)
    if native is not None and not _on_this_path(tx, key, native.covers_through_id):
        native = None
    if native is None or not compaction_sent(native, Target.of(route)):
        return StandingIn(summary)
    stand_in = Summary(
        summary=native_compaction.stand_in(native.items),
        updated_at=native.saved_at,
        covers_through_id=native.covers_through_id,
    )
    return StandingIn(stand_in, native)


def request_rows(
    tx: Reading,
    settings: Settings,
    key: Key,
    route: Route,
    options: PrepareOptions,
    standing: StandingIn | None = None,
) -> RequestRows:
    """What ``prepare`` reads in ``tx``: the newest turns it can send, all older system rows
    and the figures of the older turns (so the cost follows the request, not the history), or
    every row when those figures are missing or do not add up to the store's totals; with what
    stands in for the turns it covers (``standing``, else ``standing_in``'s)."""
    if standing is None:
        standing = standing_in(tx, key, route)
    summary = standing.summary
    window = _window(tx, settings, key, route, options, summary)
    if window is None:
        return tx.all_rows(key), None, summary
    return window[0], window[1], summary


def _on_this_path(tx: Reading, key: Key, covers_through_id: int | None) -> bool:
    """Whether what covers through row ``covers_through_id`` (a summary, a native compaction)
    tells of the active path: not when that row is on another branch (version 5), for it then
    tells of rows this request does not hold."""
    if covers_through_id is None:
        return True
    totals = tx.totals(key)
    if totals is None or not totals.branches:
        return True
    covered = TreeReading(tx).node(key, covers_through_id)
    return covered is None or covered.active


#: Conversations whose last compaction proposal a ``ProposalMemo`` keeps.
_PROPOSALS = 8


class ProposalMemo:
    """Each conversation's last compaction proposal, with what it was worked out from: the
    database's revision (``Reading.revision``: every write of this connection and every commit
    of another changes it), the route, the options and the settings. A ``prepare`` that finds
    them all unchanged reuses the proposal instead of reading and building it again (issue 23:
    once per change of the conversation, not on every request)."""

    def __init__(self, size: int = _PROPOSALS) -> None:
        self._size = size
        self._entries: dict[Key, tuple[tuple[object, ...], CompactionProposal | None]] = {}

    def get(self, key: Key, made_of: tuple[object, ...]) -> tuple[CompactionProposal | None] | None:
        """The remembered proposal (in a 1-tuple: it may be None) when ``made_of`` matches."""
        entry = self._entries.get(key)
        if entry is None or entry[0] != made_of:
            return None
        return (entry[1],)

    def put(
        self, key: Key, made_of: tuple[object, ...], proposal: CompactionProposal | None
    ) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (made_of, proposal)
        while len(self._entries) > self._size:
            del self._entries[next(iter(self._entries))]


def prepare_in(
    tx: Reading,
    settings: Settings,
    key: Key,
    route: Route,
    options: PrepareOptions,
    *,
    cache_key: str,
    memo: ProposalMemo | None = None,
    bodies: BodyMemo | None = None,
) -> tuple[Prepared, CompactionProposal | None, StandingIn]:
    """The request, its compaction proposal (formatted with ``cache_key`` and the settings'
    breakpoints) and what stands in for its oldest turns, in one snapshot: the proposal
    ``memo`` remembers for this conversation when nothing it was made of changed, else the new
    one (then remembered; its body the one ``bodies`` remembers, when it does)."""
    made_of = (tx.revision(), route, options, settings.context, cache_key)
    known = memo.get(key, made_of) if memo is not None else None
    standing = standing_in(tx, key, route)
    prepared = _prepared_in(tx, settings, key, route, options, standing, propose=known is None)
    if known is not None:
        return prepared, known[0], standing
    compaction = _compaction(
        route,
        prepared.compaction,
        cache_key=cache_key,
        breakpoints=settings.context.prompt_cache == "auto",
        standing=standing,
        bodies=bodies,
    )
    if memo is not None:
        memo.put(key, made_of, compaction)
    return prepared, compaction, standing


def _prepared_in(
    tx: Reading,
    settings: Settings,
    key: Key,
    route: Route,
    options: PrepareOptions,
    standing: StandingIn,
    *,
    propose: bool,
) -> Prepared:
    """``prepare_rows`` on what the read plan reads, in one snapshot: the window; with the
    oldest uncovered turns too when a due proposal needs them; else every row. ``standing``
    stands in for the turns it covers."""
    rows, omitted, summary = request_rows(tx, settings, key, route, options, standing)
    calibration_key = key_of(route)
    request = request_options(
        settings,
        route,
        options,
        summary=summary,
        calibration=calibration_of(
            tx.calibration_ratios(calibration_key.kind, calibration_key.model)
        ),
        propose=propose,
    )
    if omitted is None:
        return prepare_rows(rows, request)
    # The oldest uncovered turns are read only when a due proposal needs them.
    head = functools.partial(_head, tx, settings, key, rows, request)
    with contextlib.suppress(OmittedTurnsKept):  # a window that was too small: still correct
        return prepare_rows(rows, attrs.evolve(request, omitted=omitted, head=head))
    return prepare_rows(tx.all_rows(key), request)


def _window(
    tx: Reading,
    settings: Settings,
    key: Key,
    route: Route,
    options: PrepareOptions,
    summary: Summary | None,
) -> tuple[list[StoredMessage], OmittedTurns | None] | None:
    """The read plan (``policy.prepare.readplan``) carried out in ``tx``: the rows to send and the
    turns left unread (those the summary covers among them), or None when every row must
    be read."""
    limits = readplan.read_limits(settings.context, route, options.keep_tool_context_turns)
    cover = honoured_coverage(summary)
    first_uncovered = None if cover is None else _first_uncovered_turn(tx, key, cover)
    with contextlib.closing(tx.newest_first(key)) as newest:
        if first_uncovered is None:
            back = readplan.read_back(newest, limits)
        else:
            back = readplan.read_back(readplan.until_turn(newest, first_uncovered), limits)
    if not back.rows or (back.whole and first_uncovered is None):
        return back.rows, None
    start = back.rows[0]
    read = [*tx.system_rows(key, start.id), *back.rows]
    oldest_spoken = tx.oldest_spoken(key)
    if oldest_spoken is None or oldest_spoken[1] >= start.turn:
        return read, None  # only system rows are older
    oldest_id, oldest = oldest_spoken
    first = oldest if first_uncovered is None else max(oldest, first_uncovered)
    groups = readplan.omitted_figures(
        [
            readplan.covered_range(oldest, first_uncovered),
            *readplan.omitted_ranges(
                first,
                start.turn,
                back.turns,
                limits.keep_turns,
                first_kept=readplan.stepped_first_turn(
                    settings.context, limits, back.rows[-1].turn
                ),
            ),
        ],
        lambda first, last: tx.figures_between(key, first, last),
    )
    if groups is None:
        return None  # turns written before schema 2
    totals = tx.totals(key)
    assert totals is not None
    covered, beyond, within = groups
    omitted = readplan.checked_omission(
        beyond,
        within,
        left_out=readplan.left_out(totals.message_count, totals.tokens, read),
        tools_given=options.tools is not None,
        covered=covered,
        covers_through_id=cover,
        oldest_spoken_id=oldest_id,
    )
    return None if omitted is None else (read, omitted)


def _first_uncovered_turn(tx: Reading, key: Key, cover: int) -> int | None:
    """The oldest turn a summary covering through ``cover`` leaves uncovered: the turn of
    the first row after it, else the newest turn (never covered)."""
    turn = tx.turn_after(key, cover)
    if turn is None:
        totals = tx.totals(key)
        return totals.last_turn if totals is not None else None
    return turn


def _head(
    tx: Reading,
    settings: Settings,
    key: Key,
    rows: Sequence[StoredMessage],
    request: RequestOptions,
) -> list[StoredMessage]:
    """A due proposal's ``head`` (``RequestOptions.head``): the system rows before the
    oldest uncovered turn, then that turn and the next ones, oldest first, up to the
    window's first turn or as far as a proposal can hold (``readplan.read_head``)."""
    stop = next((row for row in rows if row.role != "system"), None)
    if stop is None:
        return []
    context = settings.context
    limit = effective_budget(context, request.route) - context.compaction_max_summary_tokens
    summary = request.summary
    cover = honoured_coverage(summary if isinstance(summary, Summary) else None)
    prefix: list[StoredMessage] = []
    after = 0
    if cover is not None:
        turn = tx.turn_after(key, cover)
        if turn is None:
            return []
        prefix, after = tx.turn_rows_before(key, cover + 1, turn), cover
    with contextlib.closing(tx.oldest_first(key, after)) as newer:
        turns = readplan.read_head(
            itertools.chain(prefix, newer),
            stop_id=stop.id,
            limit=limit,
            calibration=request.calibration,
        )
    if not turns or cover is None:
        return turns
    return [*tx.system_rows(key, turns[0].id), *turns]


def _continued_body(
    route: Route,
    rows: Sequence[Message],
    *,
    breakpoints: bool,
    standing: StandingIn,
    bodies: BodyMemo | None,
) -> tuple[dict[str, object], str]:
    """The body continuing the newest row (providers.continuation), and what was cut from it."""
    found = continuation.continued(route.kind, route.model, rows)
    body = _body(route, found.rows, breakpoints=breakpoints, standing=standing, bodies=bodies)
    return continuation.finish(route.kind, found, body), found.trimmed


def _body(
    route: Route,
    rows: Sequence[Message],
    *,
    breakpoints: bool,
    standing: StandingIn,
    bodies: BodyMemo | None = None,
) -> dict[str, object]:
    """Rows formatted for the route, with the prompt-cache breakpoints when ``breakpoints``
    (protocol.md "Version 3"), each row's provider state only where it stays valid, and the
    native compaction's items in place of its stand-in (protocol.md "Version 5"): the body
    ``bodies`` remembers for the same rows and everything else it is made of, when it does."""
    target = Target.of(route)
    replaced_at = standing.replaced_at(rows)
    native = standing.items()

    def render() -> dict[str, object]:
        return format_body(
            route.kind,
            rows,
            route.model,
            swept=True,
            breakpoints=breakpoints,
            note=note_of(rows) if breakpoints else None,
            target=target,
            replaced_at=replaced_at,
            native=native,
        )

    if bodies is None:
        return render()
    # The native items by their JSON: the stand-in is made of it (``standing_in``).
    made_of = (
        route.kind,
        route.model,
        target,
        breakpoints,
        replaced_at,
        None if native is None else native.stand_in,
    )
    return bodies.body(rows, made_of, render)


def _compaction(
    route: Route,
    proposal: Proposal | None,
    *,
    cache_key: str,
    breakpoints: bool,
    standing: StandingIn,
    bodies: BodyMemo | None,
) -> CompactionProposal | None:
    """A compaction proposal with its request formatted for the route (breakpoints and the
    conversation's ``cache_key`` as on every request)."""
    compaction = None
    if proposal is not None:
        compaction = CompactionProposal(
            through_id=proposal.through_id,
            covered_turns=proposal.covered_turns,
            estimated_tokens=proposal.estimated_tokens,
            raw_estimated_tokens=proposal.raw_estimated_tokens,
            request=ProviderRequest(
                provider=route.name,
                model=route.model,
                body=_body(
                    route,
                    proposal.rows,
                    breakpoints=breakpoints,
                    standing=standing,
                    bodies=bodies,
                ),
                cache_key=cache_key,
            ),
        )
    return compaction


def prepared_request(
    route: Route,
    prepared: Prepared,
    compaction: CompactionProposal | None,
    *,
    cache_key: str,
    breakpoints: bool,
    continuing: bool = False,
    standing: StandingIn | None = None,
    bodies: BodyMemo | None = None,
) -> PreparedRequest:
    """``prepare``'s result: the rows formatted for the route, with the prompt-cache
    breakpoints when ``breakpoints``, the conversation's ``cache_key``, and the proposal
    (``prepare_in`` formatted it, or found it remembered); ``continuing`` the newest row;
    ``standing``: what stood in for the oldest turns (``prepare_in``'s); ``bodies``: the bodies
    rendered lately, reused when nothing they are made of changed."""
    standing = standing if standing is not None else StandingIn(None)
    if continuing:
        body, trimmed = _continued_body(
            route, prepared.rows, breakpoints=breakpoints, standing=standing, bodies=bodies
        )
    else:
        body = _body(
            route, prepared.rows, breakpoints=breakpoints, standing=standing, bodies=bodies
        )
        trimmed = None
    return PreparedRequest(
        provider=route.name,
        model=route.model,
        body=body,
        continue_trimmed=trimmed,
        cache_key=cache_key,
        estimated_tokens=prepared.estimated_tokens,
        budget=prepared.budget,
        context_window=prepared.context_window,
        trimmed=prepared.trimmed,
        collapsed_tool_rows=prepared.collapsed_tool_rows,
        collapsed_turns=prepared.collapsed_turns,
        compaction=compaction,
        compacted_turns=prepared.compacted_turns,
        compacted_messages=prepared.compacted_messages,
        raw_estimated_tokens=prepared.raw_estimated_tokens,
        calibration=prepared.calibration,
    )
