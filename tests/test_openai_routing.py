"""Routing: rendezvous stickiness, slot accounting, health probes and recovery."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fake_server import FakeOpenAIServer, dead_endpoint

from spec_vetting.engine_interface import SlotGate
from spec_vetting.engines.http.routing import Router, pick_endpoint, probe_health


def test_rendezvous_moves_only_the_dead_endpoints_candidates():
    eps = [f"http://h{i}:30000/v1" for i in range(4)]
    keys = [f"cand-{i}" for i in range(400)]
    before = {k: pick_endpoint(k, eps) for k in keys}
    after = {k: pick_endpoint(k, [e for e in eps if e != eps[1]]) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert moved and all(before[k] == eps[1] for k in moved)
    counts = {e: list(before.values()).count(e) for e in eps}
    assert min(counts.values()) > 60  # spread over all endpoints


def test_health_probe_root_then_models_fallback():
    async def main(urls):
        async with httpx.AsyncClient() as client:
            return [await probe_health(client, u, timeout_s=1.0) for u in urls]

    with FakeOpenAIServer() as ok, FakeOpenAIServer(health_endpoint=False) as no_health, FakeOpenAIServer() as sick:
        sick.healthy = False
        res = asyncio.run(main([ok.base_url, no_health.base_url, sick.base_url, dead_endpoint()]))
        assert res[0] == (True, None)
        assert res[1] == (True, None)
        assert [q.path for q in no_health.requests] == ["/health", "/v1/models"]
        assert res[2][0] is False and "503" in res[2][1]
        assert res[3][0] is False and "failed" in res[3][1]


def test_unhealthy_endpoint_comes_back_through_polling():
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        router = Router([a.base_url, b.base_url], max_inflight_per_endpoint=1, health_interval_s=0.05)

        async def main():
            async with httpx.AsyncClient() as client:
                router.mark_unhealthy(a.base_url, "test")
                assert router.healthy == [b.base_url]
                router.start_polling(client)
                for _ in range(100):
                    await asyncio.sleep(0.02)
                    if a.base_url in router.healthy:
                        break
                await router.stop_polling()
            return router.healthy

        assert set(asyncio.run(main())) == {a.base_url, b.base_url}


def test_slots_cap_and_release():
    router = Router(["http://a/v1"], max_inflight_per_endpoint=2, health_interval_s=0)

    async def main():
        got = [await router.acquire("x"), await router.acquire("y")]
        waiter = asyncio.create_task(router.acquire("z"))
        await asyncio.sleep(0.05)
        assert not waiter.done()  # third inspection waits for a slot
        router.release(got[0])
        assert await asyncio.wait_for(waiter, 1.0) == "http://a/v1"
        return router.states["http://a/v1"].in_flight

    assert asyncio.run(main()) == 2


def test_full_preferred_endpoint_spills_to_the_least_loaded_one():
    a, b, c = "http://a/v1", "http://b/v1", "http://c/v1"
    router = Router([a, b, c], max_inflight_per_endpoint=2, health_interval_s=0)
    key = "cand-7"
    preferred = pick_endpoint(key, [a, b, c])
    others = [e for e in (a, b, c) if e != preferred]

    async def main():
        got = [await router.acquire(key), await router.acquire(key)]
        assert got == [preferred, preferred]  # sticky while the preferred endpoint has room
        router.states[others[0]].in_flight = 1  # one busy, one idle
        spill = await router.acquire(key)
        assert spill == others[1]  # the idle one, not a queue behind the full one
        router.states[others[0]].in_flight = 2
        router.states[others[1]].in_flight = 2
        waiter = asyncio.create_task(router.acquire(key))
        await asyncio.sleep(0.05)
        assert not waiter.done()  # everything full: wait
        router.release(others[0])  # a slot frees anywhere: the waiter takes it
        assert await asyncio.wait_for(waiter, 1.0) == others[0]
        router.release(preferred)
        assert await router.acquire(key) == preferred  # back home once there is room

    asyncio.run(main())


def test_a_candidate_that_spilled_keeps_the_replica_its_first_inspection_ran_on():
    """Its picture is cached where its first inspection ran: its other tasks go there, not to its hash pick."""
    a, b = "http://a/v1", "http://b/v1"
    router = Router([a, b], max_inflight_per_endpoint=1, health_interval_s=0)
    key = "cand-3"
    preferred = pick_endpoint(key, [a, b])
    other = b if preferred == a else a

    async def main():
        router.states[preferred].in_flight = 1  # its own replica is full
        first = await router.acquire(key)
        assert first == other  # spilled
        router.release(first)
        router.states[preferred].in_flight = 0  # both free now
        assert await router.acquire(key) == other  # the replica holding its prefix, not the hash pick
        assert await router.acquire("cand-unrelated-9") in (a, b)
        router.release(other)
        router.mark_unhealthy(other, "test")
        router.states[preferred].in_flight = 0
        assert await router.acquire(key) == preferred  # its home died: back to the hash pick

    asyncio.run(main())


def test_waiters_skip_an_endpoint_that_died():
    a, b = "http://a/v1", "http://b/v1"
    router = Router([a, b], max_inflight_per_endpoint=1, health_interval_s=0)

    async def main():
        first = [await router.acquire("x"), await router.acquire("y")]
        waiter = asyncio.create_task(router.acquire("z"))
        await asyncio.sleep(0.02)
        router.mark_unhealthy(first[0], "test")
        router.release(first[0])  # its slot frees, but it is dead: the waiter must not take it
        await asyncio.sleep(0.02)
        assert not waiter.done()
        router.release(first[1])
        return await asyncio.wait_for(waiter, 1.0), first[1]

    got, alive = asyncio.run(main())
    assert got == alive


class _CountingGate(SlotGate):
    """A shared gate as the pipeline's Dask semaphores behave: ``cap`` slots per endpoint over every engine; it
    records the most slots ever held at once per endpoint."""

    def __init__(self, cap: int):
        self.cap, self.held, self.most = cap, {}, {}
        self.changed = asyncio.Condition()

    async def acquire(self, endpoint, timeout_s):
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(lambda: self.held.get(endpoint, 0) < self.cap),
                                       timeout_s if timeout_s > 0 else 0.001)
            except TimeoutError:
                return False
            self.held[endpoint] = self.held.get(endpoint, 0) + 1
            self.most[endpoint] = max(self.most.get(endpoint, 0), self.held[endpoint])
            return True

    async def release(self, endpoint):
        async with self.changed:
            self.held[endpoint] -= 1
            self.changed.notify_all()


def test_a_shared_gate_caps_every_engine_together():
    """Two engines (two workers) with a local cap of 2 each share a gate of 2 per endpoint: together they never hold
    more than 2, a waiter of one engine takes the slot the other gives back, and a full endpoint spills over."""
    a, b = "http://a/v1", "http://b/v1"
    gate = _CountingGate(2)
    one, two = (Router([a, b], max_inflight_per_endpoint=2, health_interval_s=0) for _ in range(2))
    for r in (one, two):
        r.gate = gate
    key = "cand-3"
    home = pick_endpoint(key, [a, b])
    away = b if home == a else a

    async def main():
        first = [await one.acquire(key), await one.acquire(key)]
        assert first == [home, home]
        assert await two.acquire(key) == away  # home is full over both engines: spill over at the gate
        await two.acquire(key)
        waiter = asyncio.create_task(two.acquire(key))
        await asyncio.sleep(0.1)
        assert not waiter.done()  # every slot of both endpoints is held, though engine two's own caps have room
        await one.release_slot(home)  # the other engine gives one back: the waiter takes it
        assert await asyncio.wait_for(waiter, 2.0) == home
        assert one.states[home].in_flight == 1 and two.states[home].in_flight == 1

    asyncio.run(main())
    assert gate.most == {a: 2, b: 2}


def test_a_gate_slot_taken_after_its_waiter_was_cancelled_is_given_back():
    """An inspection cancelled while its slot is being taken at the Dask gate (a thread asking the scheduler) must
    not keep the slot: the run would lose it for good."""
    from spec_vetting.pipeline.slots import DaskSlotGate

    released = []

    class SlowSemaphore:
        def acquire(self, timeout=None):
            time.sleep(0.2)  # the scheduler answers after the waiter is gone
            return True

        def release(self):
            released.append(1)

    gate = DaskSlotGate.__new__(DaskSlotGate)
    gate._sems, gate._worker = {"http://a/v1": SlowSemaphore()}, None

    async def main():
        waiter = asyncio.create_task(gate.acquire("http://a/v1", 1.0))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.sleep(0.5)

    asyncio.run(main())
    assert released == [1]
