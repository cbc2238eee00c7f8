"""A candidate's tasks in an order that lets the server's prefix cache serve them: one first, the others after.

Every task of one candidate opens with the same system text and the same full-view picture; only the task text
after the picture differs. A server whose cache takes a prefix in only once a request has computed it (SGLang's
radix cache, after the prefill batch) prefills that common part, and runs the vision encoder on the picture, once
per task when the tasks arrive together. So in a shard one pair of each candidate goes first (its first pair in
plan order) and the candidate's other pairs wait until that pair's first reply has come back, by which time the
server has the prefix cached. Waiting pairs hold no slot: the shard's other candidates take the endpoint's
in-flight slots meanwhile, so the slots stay as full as before and nothing waits on an idle server that has other
work. (vLLM commits blocks to its cache when it schedules them and shares them either way; the order costs it
nothing: benchmarks/RESULTS.md, issue 39.)

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
    may start at once.
    """

    def __init__(self, items: Sequence, *, enabled: bool):
        ids = [str(i.candidate.candidate_id) for i in items]
        counts = Counter(ids)
        self._first: dict[str, int] = {}
        self._opened: dict[str, asyncio.Event] = {}
        if enabled:
            for n, cid in enumerate(ids):
                if counts[cid] > 1 and cid not in self._first:
                    self._first[cid] = n
                    self._opened[cid] = asyncio.Event()

    def goes_first(self, n: int, cid: str) -> bool:
        """Pair ``n`` is the one its candidate's other pairs wait for."""
        return self._first.get(cid) == n

    async def wait_turn(self, n: int, cid: str) -> None:
        """Return when pair ``n`` may start: at once for a first pair or a candidate alone in the shard, else once
        the candidate's first pair has had its first reply (or has ended)."""
        opened = self._opened.get(cid)
        if opened is not None and not self.goes_first(n, cid):
            await opened.wait()

    def open(self, cid: str) -> None:
        """Let ``cid``'s waiting pairs go (its first pair's first reply is back, or that pair is over)."""
        opened = self._opened.get(cid)
        if opened is not None:
            opened.set()

    def engine_for(self, n: int, cid: str, engine: Engine) -> Engine:
        """``engine`` itself, or for a first pair the same engine telling this order when its first reply is back."""
        if not self.goes_first(n, cid):
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
        self.name = engine.name
        self.p_yes_source = engine.p_yes_source
        self.drives_model = engine.drives_model

    def identity(self) -> EngineIdentity:
        return self._engine.identity()

    def session(self, ctx: InspectionContext) -> EngineSession:
        return _SignallingSession(self._engine.session(ctx), self._on_reply)
