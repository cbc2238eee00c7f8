"""One shard, run on a Dask worker: one event loop, many inspections in flight, rows written atomically.

Waiting on model servers is what takes time, so a shard runs its inspections concurrently on one asyncio loop
(bounded by the engine's own per-endpoint cap and by ``concurrency``), while FITS files are read in the worker's
reader processes (killed at the read timeout, capped in memory) so a read never stalls the loop. On servers with
a prefix cache, one pair of each candidate goes first and its others follow its first reply (:mod:`.warm_prefix`).
The engine and its loop live for the whole worker process (:class:`EngineHost`).
Whatever goes wrong with one candidate becomes that candidate's ERROR row; only a failure that concerns the whole
shard (the engine cannot start, the disk is full) fails the shard, which the run reports and a rerun retries.

Why one file of about 500 lines: a shard's reads, inspections, ordering and writes run in one event loop and
share its cancellation and timeouts; split, the bounds on each would be harder to see together.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import gc
import json
import logging
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..catalog.rows import error_result, make_row_safe, rows_to_table, turn_rows, verdict_row
from ..engine_interface import Engine
from ..engines import create_engine
from ..errors import ShardFailedError, SpecVettingError
from ..inspect.loop import DEFAULT_ENDPOINT_RETRIES
from ..io.read_pool import DEFAULT_READ_MEMORY_MB, DEFAULT_READ_PROCESSES, process_pool
from ..protocol import MAX_ASSISTANT_TURNS
from ..types import InspectionContext, Sampling
from .config import DEFAULT_READ_TIMEOUT_S
from .plan import WorkItem
from .slots import DaskSlotGate, GateSpec
from .store import RunStore, write_json_atomic, write_parquet_atomic
from .warm_prefix import WarmPrefixOrder

log = logging.getLogger(__name__)


@dataclass
class ShardSpec:
    """Everything a worker needs to run one shard; picklable."""

    root: str
    run_id: str
    run_date: str
    shard_id: str
    items: list[WorkItem]
    engine_name: str
    engine_options: dict[str, Any]
    sampling: Sampling
    max_turns: int = MAX_ASSISTANT_TURNS
    token_budget: int | None = None
    time_budget_s: float | None = None
    read_timeout_s: float | None = DEFAULT_READ_TIMEOUT_S
    read_processes: int = DEFAULT_READ_PROCESSES  # reader processes per worker; 0: read in this process (threads)
    read_memory_mb: int = DEFAULT_READ_MEMORY_MB
    max_endpoint_retries: int = DEFAULT_ENDPOINT_RETRIES
    title: str = "Spectrum"
    tasks_file: str | None = None
    concurrency: int = 8
    self_consistency_k: int = 1
    specvi_rerender: bool = False  # draw SpecVI-Bench rows' first picture instead of showing their own `images`
    store_pictures: bool = False
    evidence_prompt: bool = False  # append the candidate's evidence sentence to the task text (off: as trained)
    #: the run's cluster-wide in-flight cap (Dask semaphores per endpoint); None: the engine's own caps only
    slot_gate: GateSpec | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def renderer_version() -> str:
    from ..render import RENDERER_VERSION  # here, not at import: matplotlib loads only where shards run

    return RENDERER_VERSION


def task_for(item: WorkItem, tasks_file: str | None, cache: dict):
    """The task as this pair is asked (a SpecVI-Bench row's own prompt included), cached by (task, prompt)."""
    from ..inspect.tasks import get_task

    prompt = getattr(item.candidate, "prompt", None)
    system = getattr(item.candidate, "system_prompt", None)
    key = (item.task, prompt, system)
    if key not in cache:
        task = get_task(item.task, tasks_file)
        if prompt:  # SpecVI-Bench rows carry their exact training messages
            task = task.with_prompt(prompt, system=system)
        cache[key] = task
    return cache[key]


def with_evidence_sentence(task, evidence: dict | None):
    """``task`` asked with the candidate's evidence sentence after its text (version ``<version>+evidence1``), or
    ``task`` itself when the candidate has no Gaia source."""
    from ..evidence.sentence import SENTENCE_VERSION, evidence_sentence
    from ..inspect.tasks import Task

    sentence = evidence_sentence(evidence)
    if sentence is None:
        return task
    return Task(key=task.key, class_name=task.class_name, prompt=f"{task.prompt} {sentence}", aliases=task.aliases,
                source=task.source, version=f"{task.version}+{SENTENCE_VERSION}")


def _initial_image(candidate) -> bytes | None:
    """The candidate list's own first picture (a SpecVI-Bench row's full view), None when it carries none."""
    load = getattr(candidate, "load_initial_image", None)
    return load() if load is not None else None


def _redshift_of(spectrum, candidate) -> float | None:
    z = getattr(getattr(spectrum, "meta", None), "redshift", None)
    if z is None:
        inline = getattr(candidate, "inline", None)
        z = getattr(inline, "redshift", None)
    return None if z is None else float(z)


def shared_zoom(spectrum, redshift: float | None, title: str):
    """One zoom tool for all of a candidate's inspections (each picture drawn once); None when the spectrum cannot
    make one, so that each inspection makes its own and records why it failed, as it would alone."""
    from ..inspect.zoom import ZoomTool

    try:
        return ZoomTool(spectrum.wavelength, spectrum.flux, redshift, title)
    except Exception:  # noqa: BLE001 - reported per inspection by run_inspection
        return None


async def _inspect(spec: ShardSpec, engine: Engine, task, ctx: InspectionContext, zoom=None):
    from ..inspect.loop import run_inspection

    kwargs = dict(
        sampling=spec.sampling,
        max_turns=spec.max_turns,
        token_budget=spec.token_budget,
        time_budget_s=spec.time_budget_s,
        title=spec.title,
        max_endpoint_retries=spec.max_endpoint_retries,
        zoom=zoom,
    )
    if spec.self_consistency_k > 1:
        from ..inspect.loop import run_inspection_with_confidence

        return await run_inspection_with_confidence(ctx, task, engine, k=spec.self_consistency_k, **kwargs)
    return await run_inspection(ctx, task, engine, **kwargs)


#: file -> set when its read abandoned at the timeout ends: while it runs, the file is not read again in this process
_ABANDONED: dict[str, threading.Event] = {}


async def read_with_timeout(fn, timeout_s: float | None, *, what: str):
    """``fn()`` in a daemon thread, awaited for at most ``timeout_s`` seconds (None = no limit): the in-process read
    (``read_processes: 0``, inline spectra, stand-ins), where a read cannot be killed.

    A daemon thread and not the loop's executor: a read stuck in the kernel (a stale NFS mount, a device) cannot
    be cancelled, and a stuck executor thread would also block the worker's exit. Past the timeout the caller gets
    :class:`~spec_vetting.errors.ReadTimeoutError` and the thread is left behind to finish or not. While it runs,
    another read of the same file (``what``: another row naming it) fails at once instead of starting one more
    thread that would block the same way: a list with hundreds of rows on one stuck file costs one timeout and one
    thread per worker process, not one of each per row.
    """
    from ..errors import ReadTimeoutError

    stuck = _ABANDONED.get(what)
    if stuck is not None:
        if not stuck.is_set():
            raise ReadTimeoutError(what, f"an earlier read of this file passed the {timeout_s:g} s read timeout and "
                                   "has not ended: not read again while it runs",
                                   hint="check the file system; the pair is retried next run")
        _ABANDONED.pop(what, None)
    loop = asyncio.get_running_loop()
    ended = threading.Event()
    fut: asyncio.Future = loop.create_future()

    def deliver(result, exc) -> None:
        if not fut.done():
            fut.set_exception(exc) if exc is not None else fut.set_result(result)

    def work() -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            result, error = None, exc
        finally:
            ended.set()
        try:
            loop.call_soon_threadsafe(deliver, result, error)
        except RuntimeError:  # the loop is gone (the read outlived its timeout and the shard): nobody waits
            pass

    threading.Thread(target=work, name="spec-vet-read", daemon=True).start()
    try:
        return await asyncio.wait_for(fut, timeout_s)
    except TimeoutError:
        if not ended.is_set():
            _ABANDONED[what] = ended
        raise ReadTimeoutError(what, f"reading the spectrum took more than {timeout_s:g} s (stale network mount or "
                               "a file that blocks?)",
                               hint="check the file system; the pair is retried next run") from None


async def read_candidate(cand, spec: ShardSpec):
    """The candidate's spectrum: from its file in one of the worker's reader processes (killed at the read timeout,
    capped in memory: :mod:`spec_vetting.io.read_pool`), or in this process when it reads no file (an inline
    SpecVI-Bench spectrum: a few numpy operations), when ``spec.read_processes`` is 0, or for a candidate that
    cannot say how to read it elsewhere (tests' stand-ins)."""
    what = getattr(cand, "path", None) or str(cand.candidate_id)
    file_read = getattr(cand, "file_read", None)
    call = file_read() if file_read is not None and spec.read_processes > 0 else None
    if call is None:
        return await read_with_timeout(cand.load_spectrum, spec.read_timeout_s, what=what)
    fn, args = call
    pool = process_pool(spec.read_processes, spec.read_memory_mb)
    return await asyncio.wrap_future(pool.submit(fn, args, key=what, timeout_s=spec.read_timeout_s,
                                                 scope=spec.run_id, sized_by=getattr(cand, "path", None)))


_FROZEN = False


def _freeze_long_lived_objects() -> None:
    """Move what the process holds before its first shard (modules, matplotlib, pyarrow, the engine) out of the
    cyclic garbage collector's view, once per process.

    A shard allocates steadily (requests, replies, pictures) and each full collection would walk those hundreds
    of thousands of long-lived objects again: measured 99-101 -> 90-92 CPU ms per 5-picture inspection
    (benchmarks/bench_client_cpu.py). Objects frozen here are still freed by reference counting.
    """
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        gc.freeze()


async def inspect_items(spec: ShardSpec, engine: Engine) -> list:
    """Run every pair of the shard on ``engine`` (started) in the running loop; one result per pair, in order."""
    _freeze_long_lived_objects()
    identity = engine.identity()
    rversion = renderer_version()
    tasks_cache: dict = {}
    sem = asyncio.Semaphore(max(1, spec.concurrency))
    # one read and one zoom tool (so one drawing of each picture) per candidate even when it runs several tasks;
    # dropped when its last task is done
    reads: dict[str, asyncio.Future] = {}
    zooms: dict[str, Any] = {}
    remaining = Counter(str(i.candidate.candidate_id) for i in spec.items)
    results: list = [None] * len(spec.items)
    # a server with a prefix cache gets one of a candidate's pairs first and the rest once its first reply is
    # back; the waiting pairs hold no slot, so the other candidates keep the endpoint's slots full meanwhile
    order = WarmPrefixOrder(spec.items, enabled=bool(getattr(engine, "warm_prefix_first", False)),
                            keep_busy=getattr(engine, "in_flight_capacity", lambda: None)())

    async def load(cand):
        cid = str(cand.candidate_id)
        if cid not in reads:
            # off the loop (a reader process, else a thread), so the other inspections' I/O goes on; every read
            # has a timeout (a stale network mount must not hang the shard)
            reads[cid] = asyncio.ensure_future(read_candidate(cand, spec))
        return await reads[cid]

    async def one(n: int, item: WorkItem) -> None:
        cand = item.candidate
        cid = str(cand.candidate_id)
        spectrum = None
        z = None
        in_turn = False
        try:
            await order.wait_turn(n, cid)
            in_turn = True
            async with sem:
                task = task_for(item, spec.tasks_file, tasks_cache)
                if spec.evidence_prompt:
                    task = with_evidence_sentence(task, getattr(cand, "evidence", None))
                started = time.time()
                try:
                    spectrum = await load(cand)
                    image = None if spec.specvi_rerender else await read_with_timeout(
                        functools.partial(_initial_image, cand), spec.read_timeout_s,
                        what=getattr(cand, "path", None) or cid)
                except Exception as exc:  # unreadable or missing: this pair's ERROR row, the run goes on
                    result = error_result(
                        cid, item.task, getattr(exc, "kind", None) or "read_error", _message(exc, cand),
                        identity=identity, prompt_version=task.version, renderer_version=rversion,
                    )
                    # when the file was looked at: an incremental run retries a permanent error only if the file
                    # was modified after this
                    result.started_at = started
                else:
                    for warning in getattr(getattr(spectrum, "meta", None), "warnings", None) or []:
                        log.warning("candidate %s: %s", cid, warning)
                    z = _redshift_of(spectrum, cand)
                    if cid not in zooms:
                        zooms[cid] = shared_zoom(spectrum, z, spec.title)
                    ctx = InspectionContext(
                        candidate_id=cid, task=item.task, run_id=spec.run_id, spectrum=spectrum, redshift=z,
                        initial_image_png=image, initial_image_source="specvi" if image else None,
                        extra={"shard_id": spec.shard_id}, evidence=dict(getattr(cand, "evidence", None) or {}),
                    )
                    result = await _inspect(spec, order.engine_for(n, cid, engine), task, ctx, zooms[cid])
        except Exception as exc:  # a bug or an unexpected failure: still exactly one row for the pair
            log.exception("candidate %s task %s failed inside the pipeline", cid, item.task)
            result = error_result(
                cid, item.task, getattr(exc, "kind", "internal_error"), f"{type(exc).__name__}: {exc}",
                identity=identity, renderer_version=rversion,
            )
        finally:
            order.over(n, cid, started=in_turn)  # a first pair lets the rest go, however it ended
            remaining[cid] -= 1
            if remaining[cid] <= 0:
                reads.pop(cid, None)
                zooms.pop(cid, None)
        results[n] = (item, result, spectrum, z)

    await asyncio.gather(*(one(n, item) for n, item in enumerate(spec.items)))
    return results


class EngineHost:
    """One started engine per worker process (and run gate), on its own event loop thread, shared by its shards.

    Sharing it makes the per-endpoint cap hold for the whole worker (not per shard), lets two shards overlap so
    one's tail does not leave endpoint slots idle, and loads a local model's weights once per worker. With a
    :class:`GateSpec` the engine also takes its slots from the run's Dask semaphores (built here, in the Dask task's
    thread, where they find the scheduler), so the cap holds over the whole cluster.
    """

    def __init__(self, name: str, options: dict[str, Any], gate: GateSpec | None = None):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="spec-vet-engine-loop", daemon=True)
        self.thread.start()
        self.active = 0  # shards running on it now (guarded by _HOSTS_LOCK)
        self.engine = create_engine(name, **options)
        try:
            if gate is not None:
                self.engine.share_slots(DaskSlotGate(gate))
            self.run(self.engine.start())
        except BaseException:
            self.stop(close_engine=False)
            raise

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self, close_engine: bool = True) -> None:
        if close_engine:
            try:
                asyncio.run_coroutine_threadsafe(self.engine.close(), self.loop).result(timeout=10)
            except Exception:  # at exit: nothing more to do about it
                log.debug("engine close failed", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


_HOSTS: dict[str, EngineHost] = {}
_HOSTS_LOCK = threading.Lock()


def engine_host(name: str, options: dict[str, Any], gate: GateSpec | None = None) -> EngineHost:
    """The worker's host for (engine, options, run gate), started on first use and marked active (give it back
    with :func:`release_host`). Starting one stops the idle hosts of other runs: a long-lived cluster serving a
    run a night would otherwise keep a started engine per night."""
    key = json.dumps([name, options, gate.names if gate else None], sort_keys=True, default=repr)
    idle: list[EngineHost] = []
    with _HOSTS_LOCK:
        host = _HOSTS.get(key)
        if host is None:
            try:
                host = EngineHost(name, options, gate)
            except Exception as exc:
                raise ShardFailedError(
                    f"the {name} engine could not start ({exc}); check the endpoints/model and rerun the same "
                    "command to resume"
                ) from exc
            idle = [h for h in _HOSTS.values() if h.active == 0]
            for k in [k for k, h in _HOSTS.items() if h.active == 0]:
                del _HOSTS[k]
            _HOSTS[key] = host
        host.active += 1
    for h in idle:
        h.stop()
    return host


def release_host(host: EngineHost) -> None:
    with _HOSTS_LOCK:
        host.active -= 1


@atexit.register
def _close_hosts() -> None:
    with _HOSTS_LOCK:
        hosts = list(_HOSTS.values())
        _HOSTS.clear()
    for host in hosts:
        host.stop()


async def run_shard_async(spec: ShardSpec) -> dict[str, Any]:
    """The shard on a private engine in the running loop (benchmarks, embedding); start to close."""
    t0 = time.perf_counter()
    engine = create_engine(spec.engine_name, **spec.engine_options)
    await engine.start()
    try:
        results = await inspect_items(spec, engine)
    finally:
        await engine.close()
    return _write_shard(spec, RunStore(spec.root, spec.run_id, spec.run_date), results, time.perf_counter() - t0)


def _message(exc: BaseException, cand) -> str:
    text = str(exc)
    path = getattr(cand, "path", None)
    if isinstance(exc, SpecVettingError) or (path and path in text):
        return text
    where = path or f"candidate {cand.candidate_id}"
    return f"{where}: {type(exc).__name__}: {text}"


def _bad_reply_rows(spec: ShardSpec, item: WorkItem, result, spectrum, z, exc: Exception) -> tuple[dict, list]:
    """The ERROR row (``bad_reply``) of a pair whose rows cannot be written, naming candidate and task."""
    ids = {"run_id": spec.run_id, "shard_id": spec.shard_id}
    message = (f"candidate {item.candidate.candidate_id}, task {item.task}: the engine's reply could not be "
               f"written to the catalog ({type(exc).__name__}: {exc}); the other pairs of the shard are kept")
    log.error("%s", message)
    bad = error_result(item.candidate.candidate_id, item.task, "bad_reply", message,
                       prompt_version=result.prompt_version, renderer_version=result.renderer_version)
    bad.engine, bad.engine_version, bad.model = result.engine, result.engine_version, result.model
    try:
        row = make_row_safe(verdict_row(bad, item.candidate, spectrum, redshift=z, **ids), "verdicts")
        rows_to_table([row], "verdicts")
    except Exception:  # noqa: BLE001 - the spectrum's own values were the trouble: the row without them
        row = make_row_safe(verdict_row(bad, item.candidate, None, redshift=None, **ids), "verdicts")
    return row, []


def _pair_rows(spec: ShardSpec, item: WorkItem, result, spectrum, z, *, check: bool) -> tuple[dict, list[dict]]:
    """The pair's verdict row and turn rows, made safe to write. With ``check`` the rows are also converted alone,
    so that a pair whose rows still cannot be written (a value no column can hold) becomes its ERROR row."""
    ids = {"run_id": spec.run_id, "shard_id": spec.shard_id}
    try:
        row = make_row_safe(verdict_row(result, item.candidate, spectrum, redshift=z, **ids), "verdicts")
        # a spectrum given inline (a SpecVI-Bench row) cannot be read again to re-render: its pictures are kept
        store = spec.store_pictures or getattr(item.candidate, "inline", None) is not None
        pair_turns = [make_row_safe(r, "turns") for r in turn_rows(result, title=spec.title, store_pictures=store,
                                                                   **ids)]
        if check:
            rows_to_table([row], "verdicts"), rows_to_table(pair_turns, "turns")
        return row, pair_turns
    except Exception as exc:  # noqa: BLE001 - any value that cannot be written becomes this pair's ERROR row
        return _bad_reply_rows(spec, item, result, spectrum, z, exc)


def _task_tables(spec: ShardSpec, pairs: list) -> tuple[list[dict], Any, Any]:
    """One task's verdict rows and its two tables. Each row is converted once; only when the task's tables cannot
    be built is every pair converted alone, so that one bad reply costs its own pair and not the shard."""
    def build(check: bool):
        rows, turns = [], []
        for item, result, spectrum, z in pairs:
            row, pair_turns = _pair_rows(spec, item, result, spectrum, z, check=check)
            rows.append(row)
            turns.extend(pair_turns)
        return rows, turns

    rows, turns = build(check=False)
    try:
        return rows, rows_to_table(rows, "verdicts"), rows_to_table(turns, "turns")
    except Exception:  # noqa: BLE001 - find the pair(s) at fault
        rows, turns = build(check=True)
        return rows, rows_to_table(rows, "verdicts"), rows_to_table(turns, "turns")


def _write_shard(spec: ShardSpec, store: RunStore, results, elapsed: float) -> dict[str, Any]:
    by_task_pairs: dict[str, list] = defaultdict(list)
    for pair in results:
        by_task_pairs[pair[0].task].append(pair)
    by_task: dict[str, Counter] = defaultdict(Counter)
    errors: Counter = Counter()
    tokens = Counter()
    inspection_s = 0.0
    name = store.part_name(spec.shard_id)
    for task, pairs in by_task_pairs.items():
        rows, verdicts_table, turns_table = _task_tables(spec, pairs)
        for row in rows:
            by_task[task][row["verdict"]] += 1
            if row["verdict"] == "ERROR":
                errors[row["error_kind"] or "error"] += 1
            for k in ("prompt_tokens", "completion_tokens", "cached_tokens"):
                tokens[k] += row[k] or 0
            inspection_s += row["elapsed_s"]
        write_parquet_atomic(store.partition("verdicts", task) / name, verdicts_table)
        write_parquet_atomic(store.partition("turns", task) / name, turns_table)
    summary = {
        "shard_id": spec.shard_id,
        "n": len(results),
        "verdicts": {t: dict(c) for t, c in sorted(by_task.items())},
        "errors": dict(errors),
        "tokens": dict(tokens),
        "elapsed_s": round(elapsed, 4),
        "inspection_s": round(inspection_s, 4),
        "finished_at": time.time(),
    }
    # the marker comes last: a shard without it is rerun and overwrites its own part files
    write_json_atomic(store.marker(spec.shard_id), summary)
    return summary


def run_shard(spec: ShardSpec) -> dict[str, Any]:
    """Dask task entry point: the shard's inspections on this worker's shared engine, then its files."""
    t0 = time.perf_counter()
    log.debug("shard %s: %d pairs on engine %s", spec.shard_id, len(spec.items), spec.engine_name)
    host = engine_host(spec.engine_name, spec.engine_options, spec.slot_gate)
    try:
        results = host.run(inspect_items(spec, host.engine))
    finally:
        release_host(host)
    summary = _write_shard(spec, RunStore(spec.root, spec.run_id, spec.run_date), results, time.perf_counter() - t0)
    log.info("shard %s done in %.1f s", spec.shard_id, time.perf_counter() - t0)
    return summary
