"""Which endpoint serves an inspection: sticky by candidate id, capped in flight, healthy only.

- Sticky: rendezvous hashing of the candidate id over the healthy endpoints, so every turn (and a rerun) of one
  candidate lands on the same replica and its prefix cache, and only the candidates of a dead endpoint move. A
  candidate whose first inspection spilled to another replica (its own was full) keeps that one as its home while
  it stays healthy: that is where its picture is cached, so its other tasks go there first.
- Capped: a semaphore per endpoint counts in-flight INSPECTIONS; a session holds its slot for all its turns. With
  a shared :class:`~spec_vetting.engine_interface.SlotGate` (a run on a Dask cluster) the slot is also taken there,
  so the cap holds over every engine of the run, however many workers there are.
- Healthy: ``GET /health`` at the server root (base URL without ``/v1``), falling back to ``GET {base}/models``;
  an endpoint whose requests fail is marked unhealthy at once and probed again in the background.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

import httpx

from ...engine_interface import SlotGate
from ...errors import EngineError

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 5.0
DEFAULT_HEALTH_INTERVAL_S = 10.0
#: an endpoint whose requests time out (it accepts and never answers, yet may still answer /health) is not used
#: for this long, doubling each time it hangs again (up to MAX_HUNG_COOLDOWN_S): the inspections meanwhile fail
#: fast instead of each waiting out its own timeouts; one answered request resets it
DEFAULT_HUNG_COOLDOWN_S = 300.0
MAX_HUNG_COOLDOWN_S = 3600.0
#: when every endpoint is full over the whole run, the engine's first waiting inspection waits this long for a slot
#: of its own endpoint at the shared gate before it looks at the others again (the gate wakes it on a release)
GATE_WAIT_S = 0.5
#: candidates whose home replica is remembered (the most recently used): a shard's candidates, many times over
HOMES_KEPT = 4096


def server_root(base_url: str) -> str:
    """``http://h:30000/v1`` -> ``http://h:30000`` (health and /get_model_info live at the root)."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def rendezvous_score(key: str, endpoint: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{endpoint}\x00{key}".encode(), digest_size=8).digest(), "big")


def pick_endpoint(key: str, endpoints: list[str]) -> str:
    """The endpoint with the highest hash score for ``key`` (stable when others come and go)."""
    if not endpoints:
        raise ValueError("no endpoint to pick from")
    return max(endpoints, key=lambda e: rendezvous_score(key, e))


@dataclass
class EndpointState:
    url: str  # base URL including /v1
    capacity: int  # in-flight inspections allowed at once
    healthy: bool = True
    last_error: str | None = None
    last_checked: float = 0.0
    in_flight: int = 0
    served: int = 0
    failures: int = 0
    hung_count: int = 0  # consecutive hangs (timeouts after the timeout retries)
    hung_until: float = 0.0  # time.monotonic() before which a passing health check does not revive it


async def probe_health(client: httpx.AsyncClient, base_url: str, *, headers: dict | None = None,
                       timeout_s: float = HEALTH_TIMEOUT_S) -> tuple[bool, str | None]:
    """(healthy, why not). ``GET /health`` at the root; a server without it is asked ``GET {base}/models``. Each
    request is bounded as a whole by ``timeout_s`` (a reply trickled a byte at a time passes httpx's per-read
    timeout)."""
    root = server_root(base_url)
    try:
        async with asyncio.timeout(timeout_s):
            r = await client.get(f"{root}/health", headers=headers, timeout=timeout_s)
        if r.status_code == 200:
            return True, None
        if r.status_code not in (404, 405):
            return False, f"GET {root}/health answered HTTP {r.status_code}"
    except TimeoutError:
        return False, f"GET {root}/health: no complete reply within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        return False, f"GET {root}/health failed: {_transport_failure(exc, timeout_s)}"
    try:
        async with asyncio.timeout(timeout_s):
            r = await client.get(f"{base_url.rstrip('/')}/models", headers=headers, timeout=timeout_s)
        if r.status_code == 200:
            return True, None
        return False, f"GET {base_url}/models answered HTTP {r.status_code}"
    except TimeoutError:
        return False, f"GET {base_url}/models: no complete reply within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        return False, f"GET {base_url}/models failed: {_transport_failure(exc, timeout_s)}"


def _transport_failure(exc: httpx.HTTPError, timeout_s: float) -> str:
    """What went wrong, readable when httpx gives no text (its timeouts carry an empty message)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {timeout_s:g} s (ConnectTimeout)"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout_s:g} s ({type(exc).__name__}): the server accepted the connection"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Router:
    """Endpoint states, slot accounting and background health polling for one engine."""

    def __init__(self, endpoints: list[str], *, max_inflight_per_endpoint: int,
                 health_interval_s: float = DEFAULT_HEALTH_INTERVAL_S,
                 hung_cooldown_s: float = DEFAULT_HUNG_COOLDOWN_S):
        if not endpoints:
            raise ValueError("at least one endpoint is needed")
        if max_inflight_per_endpoint < 1:
            raise ValueError("max_inflight_per_endpoint must be at least 1")
        self.states = {u: EndpointState(u, max_inflight_per_endpoint) for u in endpoints}
        self.health_interval_s = health_interval_s
        self.hung_cooldown_s = hung_cooldown_s
        self._poller: asyncio.Task | None = None
        self._slot_freed: asyncio.Event | None = None  # created on first use, inside the running loop
        self.gate: SlotGate | None = None
        self._gate_turn: asyncio.Lock | None = None  # one inspection of this engine at a time asks the gate
        self._homes: OrderedDict[str, str] = OrderedDict()  # key -> endpoint its first inspection ran on

    @property
    def healthy(self) -> list[str]:
        return [u for u, s in self.states.items() if s.healthy]

    def mark_unhealthy(self, url: str, why: str) -> None:
        s = self.states[url]
        if s.healthy:
            log.warning("endpoint %s marked unhealthy: %s", url, why)
        s.healthy, s.last_error = False, why
        s.failures += 1

    def mark_hung(self, url: str, why: str) -> None:
        """Unhealthy, and kept so for a cool-down even if its health check passes (see DEFAULT_HUNG_COOLDOWN_S).

        One hang episode counts once: the other requests that were in flight when it hung time out within the same
        cool-down and do not lengthen it (with N in flight the cool-down used to double N times at once)."""
        s = self.states[url]
        if time.monotonic() < s.hung_until:
            s.healthy = False
            return
        s.hung_count += 1
        cooldown = min(self.hung_cooldown_s * 2 ** (s.hung_count - 1), max(MAX_HUNG_COOLDOWN_S, self.hung_cooldown_s))
        s.hung_until = time.monotonic() + cooldown
        self.mark_unhealthy(url, f"hung ({why}); not used for {cooldown:g} s")

    def note_success(self, url: str) -> None:
        self.states[url].hung_count = 0

    async def check_all(self, client: httpx.AsyncClient, headers: dict | None = None) -> None:
        results = await asyncio.gather(*(probe_health(client, u, headers=headers) for u in self.states))
        now = time.monotonic()
        for (ok, why), (url, s) in zip(results, self.states.items(), strict=True):
            if ok and now < s.hung_until:
                continue  # answers /health but hung on requests: stays out until its cool-down ends
            if ok and not s.healthy:
                log.info("endpoint %s is healthy again", url)
                self._wake()  # its free slots can take waiting inspections
            s.healthy, s.last_checked = ok, time.time()
            if not ok:
                s.last_error = why

    def start_polling(self, client: httpx.AsyncClient, headers: dict | None = None) -> None:
        async def poll():
            while True:
                await asyncio.sleep(self.health_interval_s)
                try:
                    await self.check_all(client, headers)
                except Exception:  # polling must never die; the next round tries again
                    log.exception("health polling failed")

        if self._poller is None and self.health_interval_s > 0:
            self._poller = asyncio.create_task(poll(), name="spec-vetting-health")

    async def stop_polling(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            try:
                await self._poller
            except asyncio.CancelledError:
                pass
            self._poller = None

    def choose(self, key: str) -> str:
        healthy = self.healthy
        if not healthy:
            details = "; ".join(f"{u}: {s.last_error}" for u, s in self.states.items())
            raise EngineError(f"no healthy endpoint ({details}); check that the servers are up",
                              kind="no_healthy_endpoint")
        return pick_endpoint(key, healthy)

    def home(self, key: str) -> str:
        """The endpoint whose prefix cache should hold ``key``'s prompts: where its first inspection ran, while that
        endpoint is healthy; otherwise its rendezvous pick (:meth:`choose`)."""
        preferred = self.choose(key)  # raises when no endpoint is healthy
        url = self._homes.get(key)
        return url if url is not None and self.states[url].healthy else preferred

    def _remember(self, key: str, url: str) -> None:
        known = self._homes.get(key)
        if known is None or not self.states[known].healthy:
            self._homes[key] = url
        self._homes.move_to_end(key)
        while len(self._homes) > HOMES_KEPT:
            self._homes.popitem(last=False)

    def pick(self, key: str) -> str | None:
        """The endpoint a new inspection with ``key`` should start on, or None when every healthy one is full.

        The candidate's home (:meth:`home`) when it has a free slot: its other tasks share the picture and the
        system prompt, so the replica's prefix cache already holds them. Otherwise the healthy endpoint
        with the most free slots (hash order breaks ties), so a hash split that happens to be uneven never leaves
        a replica idle while inspections queue for another. Every turn of an inspection then stays where it
        started: the session holds the endpoint.
        """
        preferred = self.home(key)  # raises when no endpoint is healthy
        if self.states[preferred].in_flight < self.states[preferred].capacity:
            return preferred
        free = [s for s in self.states.values() if s.healthy and s.in_flight < s.capacity]
        if not free:
            return None
        return max(free, key=lambda s: (s.capacity - s.in_flight, rendezvous_score(key, s.url))).url

    async def acquire(self, key: str) -> str:
        """An endpoint for ``key`` with one of its slots taken (here and at the gate); :meth:`release_slot` gives
        it back."""
        if self._slot_freed is None:
            self._slot_freed = asyncio.Event()
        if self.gate is not None:
            return await self._acquire_gated(key)
        while True:
            # no await between clearing, picking and waiting: a release in between cannot be missed
            self._slot_freed.clear()
            url = self.pick(key)
            if url is not None:
                return self._take(url, key)
            await self._slot_freed.wait()

    def _preference(self, key: str) -> list[str]:
        """The healthy endpoints with a free slot here, in :meth:`pick`'s order: the candidate's own first, then
        the most free slots (hash order breaks ties)."""
        preferred = self.home(key)  # raises when no endpoint is healthy
        free = [s for s in self.states.values() if s.healthy and s.in_flight < s.capacity and s.url != preferred]
        rest = [s.url for s in sorted(free, key=lambda s: (s.capacity - s.in_flight, rendezvous_score(key, s.url)),
                                      reverse=True)]
        own = self.states[preferred]
        return ([preferred] if own.in_flight < own.capacity else []) + rest

    async def _acquire_gated(self, key: str) -> str:
        """:meth:`acquire` with the shared gate: the endpoints in :meth:`pick`'s order are tried without waiting;
        when the gate has no slot on any of them, the first of them is waited on for a while (a release anywhere
        in the cluster wakes it), then all are tried again. Only one inspection of this engine talks to the gate
        at a time, so the waiting costs a few scheduler calls a second per worker, not one per queued inspection."""
        if self._gate_turn is None:
            self._gate_turn = asyncio.Lock()
        async with self._gate_turn:
            while True:
                self._slot_freed.clear()
                order = self._preference(key)
                if not order:
                    await self._slot_freed.wait()  # every slot of this engine is in use: one must end first
                    continue
                for url in order:
                    if await self.gate.acquire(url, 0):
                        return self._take(url, key)
                if await self.gate.acquire(order[0], GATE_WAIT_S):
                    return self._take(order[0], key)

    def _take(self, url: str, key: str) -> str:
        self.states[url].in_flight += 1
        self._remember(key, url)
        return url

    async def release_slot(self, url: str) -> None:
        """Give back the slot :meth:`acquire` took: at the gate first, so that waiters here find it free there."""
        try:
            if self.gate is not None:
                await self.gate.release(url)
        finally:
            self.release(url)

    def release(self, url: str) -> None:
        s = self.states[url]
        s.in_flight -= 1
        s.served += 1
        self._wake()

    def _wake(self) -> None:
        if self._slot_freed is not None:
            self._slot_freed.set()
