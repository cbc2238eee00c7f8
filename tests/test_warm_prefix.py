"""A candidate's tasks in prefix-cache order (pipeline/warm_prefix.py): one goes first, the others after its first
reply, while the other candidates keep the slots full.

The stub engine below holds ``cap`` slots like the HTTP router does (a session takes one for all its turns) and
logs every session start, request and reply in order; the oracle is that log (causal order, slots in use at a
reply), not the scheduler's own state. The last test checks the same order at a fake OpenAI server, from the
times the server itself saw the requests arrive.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fake_server import ANSWER_YES, ZOOM_HALPHA, FakeOpenAIServer

from spec_vetting.engine_interface import Engine, EngineSession
from spec_vetting.engines.http.engine import OpenAIEngine
from spec_vetting.errors import EngineError
from spec_vetting.pipeline.plan import WorkItem
from spec_vetting.pipeline.shard import ShardSpec, inspect_items
from spec_vetting.synthetic.synthetic import make_spectrum
from spec_vetting.types import EngineIdentity, EngineReply, Sampling

SPECTRUM = make_spectrum("cv", seed=1, redshift=0.0)
TASKS = ("cv", "carbon", "wd")


@dataclass
class Cand:
    candidate_id: str

    def load_spectrum(self):
        return SPECTRUM


class _Session(EngineSession):
    def __init__(self, engine: SlotStub, ctx):
        self.engine, self.who = engine, (ctx.candidate_id, ctx.task)

    async def __aenter__(self):
        eng = self.engine
        await eng.slots.acquire()
        eng.in_flight += 1
        eng.log.append(("start", *self.who, None, eng.in_flight))
        return self

    async def __aexit__(self, *exc):
        eng = self.engine
        eng.in_flight -= 1
        eng.slots.release()
        eng.log.append(("end", *self.who, None, eng.in_flight))

    async def complete(self, messages, *, turn, sampling):
        eng = self.engine
        eng.log.append(("ask", *self.who, turn, eng.in_flight))
        await asyncio.sleep(eng.delays.get(self.who, eng.delays.get(self.who[0], eng.delay_s)))
        if self.who == eng.hold and turn == 0:  # the reply waits until every slot is taken (10 s at most)
            for _ in range(1000):
                if eng.in_flight == eng.cap:
                    break
                await asyncio.sleep(0.01)
        if self.who in eng.fail_first_turn and turn == 0:
            eng.log.append(("failed", *self.who, turn, eng.in_flight))
            raise EngineError("injected: the server refused the request", kind="http_400")
        eng.log.append(("reply", *self.who, turn, eng.in_flight))
        return EngineReply(text=ZOOM_HALPHA if turn == 0 else ANSWER_YES)


class SlotStub(Engine):
    """An engine with ``cap`` in-flight slots (one per inspection, held for all its turns), zoom then YES, each turn
    answered after ``delay_s`` (``delays`` per candidate or per (candidate, task))."""

    name = "stub"

    def __init__(self, cap: int, *, delay_s: float = 0.02, warm_prefix_first: bool = True,
                 fail_first_turn: tuple = (), hold: tuple | None = None, delays: dict | None = None,
                 slots: int | None = None):
        self.cap, self.delay_s, self.delays = cap, delay_s, dict(delays or {})
        self.warm_prefix_first = warm_prefix_first
        self.fail_first_turn = set(fail_first_turn)
        self.hold = hold
        self.slots = asyncio.Semaphore(slots or cap)  # more than it says it has: to see when a pair is let go
        self.in_flight = 0
        self.log: list[tuple] = []  # (event, candidate, task, turn, sessions open at that moment)

    def identity(self):
        return EngineIdentity(engine="stub", engine_version="1", model="stub")

    def in_flight_capacity(self):
        return self.cap

    def session(self, ctx):
        return _Session(self, ctx)

    def at(self, event, cid, task, turn=None) -> int:
        return next(n for n, e in enumerate(self.log) if e[:3] == (event, cid, task) and (turn is None or e[3] == turn))


def items_for(tasks_by_candidate: dict[str, int]) -> list[WorkItem]:
    """Pairs in plan order (a candidate's tasks next to each other, as build_plan makes them)."""
    return [WorkItem(Cand(cid), t) for cid, n in tasks_by_candidate.items() for t in TASKS[:n]]


def run(items, engine) -> list:
    spec = ShardSpec(root="unused", run_id="r", run_date="2026-01-01", shard_id="s0", items=items,
                     engine_name="stub", engine_options={}, sampling=Sampling(), concurrency=64)
    return asyncio.run(asyncio.wait_for(inspect_items(spec, engine), 60))


def test_later_tasks_wait_for_the_first_reply_while_other_candidates_fill_the_slots():
    # A's first reply is held back until every slot is busy: only other candidates' pairs can fill them, since
    # A's later tasks must wait for that very reply (a scheduler that held them all back would time the hold out)
    engine = SlotStub(cap=3, hold=("A", "cv"), delay_s=0.2)
    results = run(items_for({"A": 3, "B": 1, "C": 2, "D": 2}), engine)
    assert [r[1].verdict for r in results] == ["YES"] * 8
    for cid, n in (("A", 3), ("C", 2), ("D", 2)):
        for task in TASKS[1:n]:
            assert engine.at("start", cid, task) > engine.at("reply", cid, "cv", 0), engine.log
    # while A's first task waits for its first reply, every slot is busy with other candidates' first tasks
    first = engine.log[engine.at("reply", "A", "cv", 0)]
    assert first[4] == 3, engine.log
    started_before = {e[1:3] for e in engine.log[:engine.at("reply", "A", "cv", 0)] if e[0] == "start"}
    assert {t for _, t in started_before} == {"cv"}, engine.log  # (the reads end in any order)
    assert max(e[4] for e in engine.log) == 3


def test_a_later_task_goes_at_once_rather_than_leave_a_slot_idle():
    # one candidate, slots to spare: waiting for its first reply would only leave them idle
    engine = SlotStub(cap=10)
    results = run(items_for({"A": 3}), engine)
    assert [r[1].verdict for r in results] == ["YES"] * 3
    first_reply = engine.at("reply", "A", "cv", 0)
    assert all(engine.at("start", "A", t) < first_reply for t in TASKS), engine.log


def test_the_first_reply_of_a_task_that_went_early_opens_the_rest():
    # 3 slots, first pairs A and B: one slot for A's second task at once; its first reply (long before that of A's
    # slow first task) tells that the picture is cached, so A's third goes then
    engine = SlotStub(cap=3, delays={("A", "cv"): 0.8, ("A", "carbon"): 0.2, "B": 2.0}, slots=10)
    results = run(items_for({"A": 3, "B": 1}), engine)
    assert [r[1].verdict for r in results] == ["YES"] * 4
    assert engine.at("start", "A", "carbon") < engine.at("reply", "A", "cv", 0)  # went early: a slot was free
    # A's third starts on that reply: before the early task ends (which would free its place) and before A's first
    # task replies
    started = engine.at("start", "A", "wd")
    assert engine.at("reply", "A", "carbon", 0) < started < engine.at("end", "A", "carbon"), engine.log
    assert started < engine.at("reply", "A", "cv", 0)


def test_a_candidate_alone_or_with_a_failing_first_task_holds_nobody_back():
    # A's first turn fails only once B has a slot too (so that the order of the log does not depend on timing);
    # B is slow, so its slot stays taken and A's later tasks have no idle slot to take before A has failed
    engine = SlotStub(cap=2, fail_first_turn={("A", "cv")}, hold=("A", "cv"), delays={"B": 0.3})
    results = run(items_for({"A": 3, "B": 1}), engine)
    by_pair = {(r[0].candidate.candidate_id, r[0].task): r[1] for r in results}
    assert by_pair["A", "cv"].verdict == "ERROR" and by_pair["A", "cv"].error_kind == "http_400"
    assert by_pair["A", "carbon"].verdict == by_pair["A", "wd"].verdict == by_pair["B", "cv"].verdict == "YES"
    # the single-task candidate starts at once, beside A's first task
    assert engine.at("start", "B", "cv") < engine.at("failed", "A", "cv", 0)
    # A's later tasks go once its first task has failed, while B still runs
    assert engine.at("failed", "A", "cv", 0) < engine.at("start", "A", "carbon") < engine.at("end", "B", "cv")


def test_without_the_order_no_pair_waits():
    from spec_vetting.pipeline.warm_prefix import WarmPrefixOrder

    async def main():
        order = WarmPrefixOrder(items_for({"A": 3, "B": 1}), enabled=False, keep_busy=1)
        for n, cid in enumerate("AAAB"):
            await asyncio.wait_for(order.wait_turn(n, cid), 1)

    asyncio.run(main())
    assert OpenAIEngine(["http://127.0.0.1:9/v1"]).warm_prefix_first is True  # the HTTP engine's default
    assert OpenAIEngine(["http://127.0.0.1:9/v1"], warm_prefix_first=False).warm_prefix_first is False


def test_the_order_lets_waiting_pairs_go_in_plan_order_when_slots_would_idle():
    """The order's own bookkeeping: first pairs go at once; a later pair waits while first pairs still to start
    and pairs running fill the slots, and goes when they no longer do; only the first pair's reply opens the rest."""
    from spec_vetting.pipeline.warm_prefix import WarmPrefixOrder

    async def main():
        order = WarmPrefixOrder([WorkItem(Cand("A"), t) for t in TASKS[:4]] + [WorkItem(Cand("B"), "cv")],
                                enabled=True, keep_busy=2)
        await order.wait_turn(0, "A")  # A's first pair
        later = [asyncio.ensure_future(order.wait_turn(n, "A")) for n in (1, 2, 3)]
        await asyncio.sleep(0)
        assert not any(t.done() for t in later)  # B's pair is still to start: it fills the second slot
        await order.wait_turn(4, "B")
        order.over(4, "B", started=True)  # B is over: a slot would idle
        await asyncio.sleep(0)
        assert [t.done() for t in later] == [True, False, False]  # the earliest in plan order takes it
        order.over(1, "A", started=True)  # that early pair ends (failed): its slot goes on, A is not opened by it
        await asyncio.sleep(0)
        assert [t.done() for t in later] == [True, True, False]
        order.open("A")  # A's first reply
        await asyncio.sleep(0)
        assert later[2].done()

    asyncio.run(main())


def test_the_http_engine_sends_later_tasks_after_the_first_reply():
    """At a fake OpenAI server with 2 slots and 4 candidates x 2 tasks: every candidate's second task arrived only
    after its first task's first request had been answered (the server's own arrival times)."""
    delay = 0.3
    with FakeOpenAIServer(delay_s=delay) as srv:
        async def go():
            engine = OpenAIEngine([srv.base_url], max_inflight_per_endpoint=2, health_interval_s=0)
            await engine.start()
            try:
                spec = ShardSpec(root="unused", run_id="r", run_date="2026-01-01", shard_id="s0",
                                 items=items_for({"A": 2, "B": 2, "C": 2, "D": 2}), engine_name="openai",
                                 engine_options={}, sampling=Sampling(), concurrency=64)
                return await inspect_items(spec, engine)
            finally:
                await engine.close()

        results = asyncio.run(asyncio.wait_for(go(), 60))
        assert [r[1].verdict for r in results] == ["YES"] * 8
        first_turns: dict[str, list[float]] = {}
        for req in srv.chat_requests:
            headers = {k.lower(): v for k, v in req.headers.items()}
            _, cid, turn = headers["x-request-id"].split("/")
            # every task of a candidate carries the key a gateway pins to one replica (deploy/sglang/launch.sh)
            assert headers["x-smg-routing-key"] == cid
            if turn == "0":
                first_turns.setdefault(cid, []).append(req.at)
        assert srv.max_in_flight == 2
    gaps = [sorted(t)[1] - sorted(t)[0] for t in first_turns.values()]
    assert len(gaps) == 4 and all(g >= delay for g in gaps), gaps
