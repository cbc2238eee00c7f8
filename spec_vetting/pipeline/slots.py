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
import logging
from dataclasses import dataclass

from ..engine_interface import SlotGate
from ..errors import EngineError

log = logging.getLogger(__name__)


class _DropReleaseFailures(logging.Filter):
    """Dask logs a semaphore release that found the scheduler gone as an ERROR with a traceback (an interrupted
    run's workers shutting down print one per inspection in flight). It is harmless: the lease expires at the
    scheduler by itself (lease-timeout), so the record goes to DEBUG level of our own logger instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Release failed"):
            log.debug("%s", record.getMessage())
            return False
        return True


def _quiet_release_failures() -> None:
    logger = logging.getLogger("distributed.semaphore")
    if not any(isinstance(f, _DropReleaseFailures) for f in logger.filters):
        logger.addFilter(_DropReleaseFailures())


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
        from distributed import Semaphore, get_worker

        self.spec = spec
        self._sems = {url: Semaphore(max_leases=spec.max_leases, name=name) for url, name in spec.names}
        try:
            self._worker = get_worker()
        except ValueError:  # built with a client, not in a task
            self._worker = None
        _quiet_release_failures()

    def _closing(self) -> bool:
        """The worker is shutting down (the run was interrupted): its leases go with it, nothing to give back."""
        status = getattr(getattr(self._worker, "status", None), "name", "running")
        return self._worker is not None and status != "running"

    def _semaphore(self, endpoint: str):
        try:
            return self._sems[endpoint]
        except KeyError:
            raise KeyError(f"{endpoint}: not an endpoint of this run's in-flight gate "
                           f"({', '.join(self._sems)})") from None

    async def acquire(self, endpoint: str, timeout_s: float) -> bool:
        sem = self._semaphore(endpoint)
        taking = asyncio.ensure_future(asyncio.to_thread(sem.acquire, timeout=timeout_s))
        try:
            return bool(await asyncio.shield(taking))
        except asyncio.CancelledError:
            # the thread may still get the lease: give it back then, or the run would lose that slot for good
            taking.add_done_callback(lambda f: self._give_back_late(f, endpoint))
            raise
        except Exception as exc:  # noqa: BLE001 - Dask already retried: the scheduler is gone or unreachable
            raise EngineError(
                f"{endpoint}: no in-flight slot, the Dask scheduler that holds the run's cap did not answer "
                f"({type(exc).__name__}: {exc}); rerun the same command to resume once the cluster is back",
                kind="cluster_unavailable", endpoint=endpoint) from exc

    async def release(self, endpoint: str) -> None:
        sem = self._semaphore(endpoint)
        if self._closing():
            return
        try:
            await asyncio.to_thread(sem.release)
        except Exception:  # noqa: BLE001 - the lease expires at the scheduler by itself (lease-timeout)
            log.debug("releasing a slot of %s failed", endpoint, exc_info=True)

    def _give_back_late(self, taking: asyncio.Future, endpoint: str) -> None:
        if not taking.cancelled() and taking.exception() is None and taking.result():
            asyncio.ensure_future(self.release(endpoint))

    def close(self) -> None:
        """Forget the semaphores at the scheduler (the driver does this once the run's shards are over)."""
        for sem in self._sems.values():
            sem.close()
