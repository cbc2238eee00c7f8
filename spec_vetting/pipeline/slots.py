"""The per-endpoint in-flight cap over a whole Dask cluster: one ``distributed.Semaphore`` per endpoint and run.

Every worker's engine takes a lease of its endpoint's semaphore before an inspection starts there and gives it back
when the inspection ends, so ``max_inflight_per_endpoint`` holds however many workers the cluster has, and keeps
holding when workers join, leave or are replaced mid-run (shards are never tied to a worker). The scheduler holds
the count: the leases of a worker that dies without giving them back are dropped after Dask's
``distributed.scheduler.locks.lease-timeout`` (30 s by default; its worker refreshes them every fifth of that),
so the cap is never exceeded and a lost worker's slots come back by themselves.

The semaphores are named after the run, the cap and the endpoint: a resumed run shares them with any shard of an
earlier attempt still running on the cluster, and a run with another cap gets its own.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

from ..engine_interface import SlotGate


@dataclass(frozen=True)
class GateSpec:
    """What a worker needs to join the run's semaphores (picklable, travels in each :class:`~.shard.ShardSpec`)."""

    names: tuple[tuple[str, str], ...]  # (endpoint, semaphore name)
    max_leases: int


def gate_spec(run_id: str, endpoints: list[str], cap: int) -> GateSpec:
    def name(url: str) -> str:
        return f"spec-vet/{run_id}/cap{cap}/{hashlib.blake2b(url.encode(), digest_size=6).hexdigest()}"

    return GateSpec(tuple((url, name(url)) for url in endpoints), cap)


class DaskSlotGate(SlotGate):
    """A :class:`SlotGate` on the Dask semaphores of :class:`GateSpec`. Built inside a Dask task (or with a client),
    where the semaphores find the scheduler; used from any event loop (the engine's own): each call runs the
    semaphore's blocking method in a thread, which hands it to the worker's loop."""

    def __init__(self, spec: GateSpec):
        from distributed import Semaphore

        self.spec = spec
        self._sems = {url: Semaphore(max_leases=spec.max_leases, name=name) for url, name in spec.names}

    def _semaphore(self, endpoint: str):
        try:
            return self._sems[endpoint]
        except KeyError:
            raise KeyError(f"{endpoint}: not an endpoint of this run's in-flight gate "
                           f"({', '.join(self._sems)})") from None

    async def acquire(self, endpoint: str, timeout_s: float) -> bool:
        sem = self._semaphore(endpoint)
        return bool(await asyncio.to_thread(sem.acquire, timeout=timeout_s))

    async def release(self, endpoint: str) -> None:
        sem = self._semaphore(endpoint)
        await asyncio.to_thread(sem.release)

    def close(self) -> None:
        """Forget the semaphores at the scheduler (the driver does this once the run's shards are over)."""
        for sem in self._sems.values():
            sem.close()
