"""A candidate's tasks in an order that lets the server's prefix cache serve them: one first, the others after.

Every task of one candidate opens with the same system text and the same full-view picture; only the task text after
the picture differs. A server whose cache takes a prefix in only once a request has computed it (SGLang's radix
cache, after the prefill batch) prefills that common part, and runs the vision encoder on the picture, once per task
when the tasks arrive together. So in a shard one pair of each candidate goes first (its first pair in plan order)
and the candidate's other pairs wait until that pair's first reply has come back (or the first reply of one of them
that went early), by which time the server has the prefix cached. Waiting pairs hold no slot: the shard's other
candidates take the endpoint's in-flight slots meanwhile. Where the shard has too few other pairs to fill the
engine's slots (fewer candidates than slots, the end of a shard), a waiting pair goes anyway, cache or not: a slot
never stands idle for the order. (vLLM commits blocks to its cache when it schedules them and shares them either
way: benchmarks/RESULTS.md, issue 39.)

Only the order changes: every request is the one it would be otherwise (same text, same pictures, same sampling).
The first pair opens the others however it ends (a reply, an error, an unreadable file), so a failing first task
never holds its candidate back. Engines say whether their servers keep such a cache (``Engine.warm_prefix_first``);
for the others (rules, in-process) every pair starts at once, as before.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence

from ..engine_interface import Engine, EngineSession
from ..types import EngineIdentity, EngineReply, InspectionContext, Message, Sampling


class WarmPrefixOrder:
    """One shard's order: for each candidate with several pairs, which pair goes first and when the rest may go.

    ``items`` are the shard's pairs (anything with ``.candidate.candidate_id``); with ``enabled`` False every pair
    may start at once. ``keep_busy`` is how many inspections the engine can have in flight (None: no cap): a
    waiting pair also goes, first reply or not, when the shard's started pairs and the first pairs still to start
    are fewer than that, since a slot would otherwise stand idle (a shard with fewer candidates than slots, the
    end of a shard). Such a pair finds no picture cached, as every pair did before this order.
    """

    def __init__(self, items: Sequence, *, enabled: bool, keep_busy: int | None = None):
        ids = [str(i.candidate.candidate_id) for i in items]
        counts = Counter(ids)
        self._first: dict[str, int] = {}
        self._opened: dict[str, asyncio.Event] = {}
        if enabled:
            for n, cid in enumerate(ids):
                if counts[cid] > 1 and cid not in self._first:
                    self._first[cid] = n
                    self._opened[cid] = asyncio.Event()
        self._keep_busy = keep_busy
        # pairs that never wait (first pairs, candidates alone in the shard) and have not started yet
        self._starters_left = len(ids) - sum(counts[cid] - 1 for cid in self._first)
        self._active = 0  # pairs started and not yet over
        self._waiting: dict[int, tuple[str, asyncio.Future]] = {}  # pair index -> (candidate, its go signal)

    def goes_first(self, n: int, cid: str) -> bool:
        """Pair ``n`` is the one its candidate's other pairs wait for."""
        return self._first.get(cid) == n

    def _waits(self, n: int, cid: str) -> bool:
        opened = self._opened.get(cid)
        return opened is not None and not opened.is_set() and not self.goes_first(n, cid)

    def _room(self) -> bool:
        return self._keep_busy is not None and self._active + self._starters_left < self._keep_busy

    async def wait_turn(self, n: int, cid: str) -> None:
        """Return when pair ``n`` may start: at once for a first pair or a candidate alone in the shard, else once
        the candidate's first pair has had its first reply (or has ended), or a slot would stand idle without it.
        Every pair must call :meth:`over` when it is over."""
        if not self._waits(n, cid):
            if cid not in self._opened or self.goes_first(n, cid):
                self._starters_left -= 1
            self._active += 1
            return
        go = asyncio.get_running_loop().create_future()
        self._waiting[n] = (cid, go)
        self._fill()
        try:
            await go
        except asyncio.CancelledError:
            if self._waiting.pop(n, None) is None:
                self.done()  # it had been let go already: its place goes to the next
            raise

    def open(self, cid: str) -> None:
        """Let ``cid``'s waiting pairs go (its first pair's first reply is back, or that pair is over)."""
        opened = self._opened.get(cid)
        if opened is None or opened.is_set():
            return
        opened.set()
        for n in [n for n, (c, _) in self._waiting.items() if c == cid]:
            self._let_go(n)

    def over(self, n: int, cid: str, *, started: bool) -> None:
        """Pair ``n`` is over, however it ended (``started``: it had returned from :meth:`wait_turn`). A first pair
        lets its candidate's other pairs go; a started pair's place may go to a waiting pair."""
        if self.goes_first(n, cid):
            self.open(cid)
        if started:
            self.done()

    def done(self) -> None:
        """A pair that started is over: its place may go to a waiting pair."""
        self._active -= 1
        self._fill()

    def _fill(self) -> None:
        while self._waiting and self._room():
            self._let_go(min(self._waiting))  # in plan order

    def _let_go(self, n: int) -> None:
        _, go = self._waiting.pop(n)
        self._active += 1
        if not go.done():
            go.set_result(None)

    def engine_for(self, n: int, cid: str, engine: Engine) -> Engine:
        """``engine`` itself, or, while ``cid``'s other pairs wait, the same engine telling this order when a reply
        is back: the first pair's, or that of a later pair that went early (its prompt began alike)."""
        opened = self._opened.get(cid)
        if opened is None or opened.is_set():
            return engine
        return ReplySignalEngine(engine, lambda: self.open(cid))


class _SignallingSession(EngineSession):
    def __init__(self, session: EngineSession, on_reply: Callable[[], None]):
        self._session = session
        self._on_reply = on_reply

    async def __aenter__(self) -> _SignallingSession:
        self._session = await self._session.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        return await self._session.__aexit__(*exc)

    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        reply = await self._session.complete(messages, turn=turn, sampling=sampling)
        self._on_reply()
        return reply

    async def count_tokens(self, text: str) -> int | None:
        return await self._session.count_tokens(text)


class ReplySignalEngine(Engine):
    """``engine`` as it is, except that every reply it gives also calls ``on_reply()``."""

    def __init__(self, engine: Engine, on_reply: Callable[[], None]):
        self._engine = engine
        self._on_reply = on_reply
        # the loop reads these off the engine it is given (the recorded identity and p_yes source)
        self.name = getattr(engine, "name", type(engine).__name__)
        self.p_yes_source = getattr(engine, "p_yes_source", "engine")
        self.drives_model = getattr(engine, "drives_model", True)

    def identity(self) -> EngineIdentity:
        return self._engine.identity()

    def in_flight_capacity(self) -> int | None:
        return getattr(self._engine, "in_flight_capacity", lambda: None)()

    def session(self, ctx: InspectionContext) -> EngineSession:
        return _SignallingSession(self._engine.session(ctx), self._on_reply)
