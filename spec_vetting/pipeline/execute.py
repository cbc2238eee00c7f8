"""A run's attempt: its shards on the Dask cluster (evidence first), followed to the end with progress, failures and
interruptions recorded in the manifest and run.log, then the catalog updated from the finished shards."""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog.damage import REPAIR_HINT, damage_report, damaged_files
from ..engines import EngineChoice
from ..errors import one_line
from .compact import compact_and_update
from .evidence import attach_evidence, attach_given
from .manifest import RunStatus, utcnow
from .preflight import job_engine_options
from .shard import ShardSpec, run_shard
from .slots import gate_spec
from .store import RunStore, mark_failed_in_place, write_json_atomic

log = logging.getLogger(__name__)


def summarize(markers: dict[str, dict]) -> dict[str, Any]:
    by_task: dict[str, Counter] = defaultdict(Counter)
    errors: Counter = Counter()
    tokens: Counter = Counter()
    n = 0
    inspection_s = 0.0
    for m in markers.values():
        n += m.get("n", 0)
        inspection_s += m.get("inspection_s", 0.0)
        for task, counts in m.get("verdicts", {}).items():
            by_task[task].update(counts)
        errors.update(m.get("errors", {}))
        tokens.update(m.get("tokens", {}))
    prompt = tokens.get("prompt_tokens", 0)
    return {
        "n_verdicts": n,
        "verdicts_by_task": {t: dict(sorted(c.items())) for t, c in sorted(by_task.items())},
        "errors_by_kind": dict(sorted(errors.items())),
        "tokens": {
            "prompt": prompt,
            "completion": tokens.get("completion_tokens", 0),
            "cached": tokens.get("cached_tokens", 0),
            "cache_hit_rate": round(tokens.get("cached_tokens", 0) / prompt, 4) if prompt else None,
        },
        "inspection_s": round(inspection_s, 3),
    }


def progress_bar(total: int, initial: int, enabled: bool | None):
    from tqdm import tqdm

    disable = (not sys.stderr.isatty()) if enabled is None else not enabled
    return tqdm(total=total, initial=initial, unit="insp", desc="inspections", disable=disable, dynamic_ncols=True)


def warn_damaged(root: Path, echo, runlog) -> None:
    """Damaged files already under the root are left out of every read (the run goes on); say which."""
    for line in damage_report(root):
        echo(f"warning: {line}")
        runlog.write("WARNING", line)


def catalog_update_failure(root: Path, exc: Exception, n_done: int, n_shards: int) -> str:
    """The one-line reason a run's compaction or current-view update failed, naming the damaged files when that
    is the cause, and what to do; how many shards did write their verdicts (staged), not a blanket "written"."""
    what = (f"{n_done} of {n_shards} shard(s) wrote their verdicts (staged, kept for the rerun) but the catalog "
            "could not be updated")
    damaged = damaged_files(root)
    if damaged:
        return (f"{what}: {'; '.join(d.line() for d in damaged)} ({one_line(exc)}); "
                f"{REPAIR_HINT.format(root=root)}, then rerun the same command")
    return f"{what}: {one_line(exc)}; fix that, then rerun the same command (it compacts the finished shards again)"


@dataclass
class Attempt:
    """The end of one attempt, whatever happens: an error it catches leaves the manifest FAILED with the reason
    (and a FAILED line in run.log), an interruption INTERRUPTED; never `running`."""

    store: RunStore
    manifest: dict
    runlog: Any
    shards: list

    def run_shards(self, execute: Callable[[], list[str]]) -> list[str]:
        try:
            return execute()
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM turned into one by the command line
            record_interruption(exc, self.store, self.manifest, self.shards, self.runlog, self.store.run_id)
            raise
        except BaseException as exc:
            record_failure(self.store, self.manifest, self.runlog, self.store.run_id,
                            f"the shards could not run: {one_line(exc)}")
            raise

    def update_catalog(self, done: set[str]) -> tuple[dict, str | None]:
        """(compaction stats, None), or ({}, the reason) after recording the failure."""
        store = self.store
        try:
            return compact_and_update(store.root, store.run_id, store.run_date, done), None
        except Exception as exc:
            reason = catalog_update_failure(Path(store.root), exc, len(done), len(self.shards))
            record_failure(store, self.manifest, self.runlog, store.run_id, reason)
            return {}, reason


def write_end(store: RunStore, manifest: dict) -> None:
    """The manifest at the attempt's end; when a full disk refuses it, its status is still turned from running to
    failed in place before the error goes on up."""
    try:
        write_json_atomic(store.manifest_path, manifest)
    except OSError:
        mark_failed_in_place(store.manifest_path)
        raise


def record_failure(store: RunStore, manifest: dict, runlog, run_id: str, reason: str) -> None:
    """A caught error ends the attempt as FAILED with its reason, in the manifest and run.log (never `running`):
    each written on its own, the manifest first; a full disk that refuses the manifest's rewrite still gets its
    status turned to failed in place (:func:`.store.mark_failed_in_place`)."""
    failed: RunStatus = "failed"
    manifest["status"] = failed
    manifest["failures"] = [reason]
    manifest.setdefault("attempts", [{}])[-1].update(finished_at=utcnow(), failed=reason)
    try:
        write_json_atomic(store.manifest_path, manifest)
    except Exception:  # the failure itself must still reach the command line
        log.debug("could not record the failure", exc_info=True)
        mark_failed_in_place(store.manifest_path)
    try:
        runlog.write("ERROR", f"FAILED run {run_id}: {reason}")
    except Exception:
        log.debug("could not write the failure to run.log", exc_info=True)


def record_interruption(exc: BaseException, store: RunStore, manifest: dict, shards, runlog, run_id: str) -> None:
    """The run.log line and manifest status of an interrupted run; finished shards (with markers) are kept."""
    import signal as _signal

    signum = getattr(exc, "signum", _signal.SIGINT)
    try:
        name = _signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    try:
        done = store.done_markers()
        n_done = sum(1 for s in shards if s.shard_id in done)
        runlog.write("ERROR", f"INTERRUPTED run {run_id} by {name}: {n_done} of {len(shards)} shards done and kept; "
                     "rerun the same command to resume")
        interrupted: RunStatus = "interrupted"
        manifest["status"] = interrupted
        manifest.setdefault("attempts", [{}])[-1].update(finished_at=utcnow(), interrupted_by=name)
        write_json_atomic(store.manifest_path, manifest)
    except Exception:  # the interruption itself must still reach the command line
        log.debug("could not record the interruption", exc_info=True)


def run_evidence(store: RunStore, opened, pending, echo, runlog, manifest: dict | None) -> None:
    """The evidence step (:mod:`.evidence`) on the current Dask client; its counts go into the manifest."""
    for oc in opened:
        if oc.note:
            echo(f"note: {oc.note}")
    summary = attach_evidence(store.root, store.run_id, opened, [i.candidate for s in pending for i in s.items])
    for name, counts in summary.items():
        line = (f"evidence {name}: {counts['with_source']} candidate(s) with a source within "
                f"{counts['radius_arcsec']:g} arcsec ({counts['matched_now']} matched now, {counts['cached']} "
                f"from the cache, {counts['given']} given in the list, {counts['no_position']} without ra/dec) in "
                f"{counts['wall_s']} s")
        echo(line)
        runlog.write("INFO", line)
        if unsure := counts.get("epoch_unknown"):
            line = (f"evidence {name}: {unsure['count']} candidate(s) without a spectrum epoch, compared at the "
                    f"catalog's epoch (a fast-moving source may be missed): {', '.join(unsure['candidates'])}"
                    + (" ..." if unsure["count"] > len(unsure["candidates"]) else ""))
            echo(line)
            runlog.write("WARNING", line)
    if manifest is not None:
        manifest.setdefault("evidence", {}).update(summary)
        write_json_atomic(store.manifest_path, manifest)


def execute_shards(job, engine: EngineChoice, store: RunStore, identity, pending, total_items, done_items, progress,
                   echo, runlog, opened=(), manifest: dict | None = None) -> list[str]:
    """Cross-match the pending shards' candidates with the evidence catalogs (``opened``) on the run's cluster,
    then submit the shards and follow them; returns failure messages (empty = all done)."""
    if not pending:
        return []
    from .cluster import dask_client

    name = engine.name
    cap = job.max_inflight_per_endpoint
    options = job_engine_options(job, engine, cap)
    slots = engine.in_flight_slots(options)
    capped = slots is not None
    with dask_client(job.cluster, len(pending), cap if capped else None) as (client, n_workers, note):
        if note:
            echo(f"note: {note}")
            runlog.write("INFO", note)
        link = client.dashboard_link if job.cluster.dashboard is not False else None
        if job.cluster.dashboard and link:  # asked for with --dashboard: a line that stays
            echo(f"Dask dashboard: {link}")
        if opened:
            run_evidence(store, opened, pending, echo, runlog, manifest)
        if not any(oc.source.name == "gaia" for oc in opened):  # a list's own Gaia columns, used as given
            if n_given := attach_given([i.candidate for s in pending for i in s.items]):
                echo(f"evidence: {n_given} candidate(s) carry Gaia columns in the list, used as given")
        # the cap over the whole cluster: one Dask semaphore per endpoint that every worker's engine takes its
        # slots from, however many workers there are now or later; each engine alone may use all of them
        gate = gate_spec(store.run_id, list(options.get("endpoints") or []), cap) if capped else None
        # an engine with in-flight caps is bounded by them; a tighter shard-level bound would let inspections
        # queued for a busy endpoint hold slots that another endpoint's inspections could use
        concurrency = 4 * slots if slots else job.concurrency
        sampling = job.sampling.to_sampling()
        futures = []
        for shard in pending:
            spec = ShardSpec(
                root=str(store.root),
                run_id=store.run_id,
                run_date=store.run_date,
                shard_id=shard.shard_id,
                items=shard.items,
                engine_name=name,
                engine_options=options,
                sampling=sampling,
                max_turns=job.budgets.max_turns,
                token_budget=job.budgets.token_budget,
                time_budget_s=job.budgets.time_budget_s,
                read_timeout_s=job.budgets.read_timeout_s,
                read_processes=job.budgets.read_processes,
                read_memory_mb=job.budgets.read_memory_mb,
                max_endpoint_retries=job.budgets.max_endpoint_retries,
                title=job.title,
                specvi_rerender=job.specvi_rerender,
                tasks_file=job.tasks_file,
                concurrency=concurrency,
                self_consistency_k=job.sampling.self_consistency_k,
                store_pictures=job.store_pictures,
                evidence_prompt=job.evidence_prompt,
                slot_gate=gate,
            )
            futures.append(client.submit(run_shard, spec, key=f"shard-{store.run_id}-{shard.shard_id}", pure=False))
        sizes = {f.key: len(s.items) for f, s in zip(futures, pending, strict=True)}
        bar = progress_bar(total_items, done_items, progress)
        if link and job.cluster.dashboard is None:  # shown while the cluster lives, gone from the final bar
            bar.set_postfix_str(f"dashboard {link}", refresh=False)
        try:
            failures = follow_shards(client, futures, job.cluster.no_worker_timeout_s,
                                     on_done=lambda fut: bar.update(sizes[fut.key]), echo=echo, runlog=runlog)
        finally:
            bar.set_postfix_str("", refresh=False)
            bar.close()
        # only once every shard is over: an interrupted run's shards may still be inspecting on the cluster
        if gate is not None:
            forget_gate(client, gate)
        return failures


#: how often a run waiting on its shards looks at the cluster's workers
WATCH_INTERVAL_S = 5.0


def follow_shards(client, futures, no_worker_timeout_s: float, *, on_done, echo, runlog) -> list[str]:
    """Wait for every shard; returns the failure messages. A shard whose worker died is run again by Dask on
    another one (after ``distributed.scheduler.allowed-failures`` deaths it fails as KilledWorker, a failure here).
    When the cluster has had no worker at all for ``no_worker_timeout_s`` (0: never give up), the shards still
    waiting fail with a message naming that cause, so that a run never waits forever on a cluster that is gone."""
    from distributed import as_completed

    failures: list[str] = []
    causes: set[str] = set()

    def fail(key: str, why: str) -> None:
        msg = f"{key}: {why}"
        failures.append(msg)
        runlog.write("ERROR", f"shard failed: {msg}")
        if why not in causes:  # one line per cause on stderr (a full disk fails every shard alike); run.log has all
            causes.add(why)
            echo(f"shard failed: {msg}")

    waiting = {f.key: f for f in futures}
    finished = as_completed(futures)
    look_every = min(WATCH_INTERVAL_S, max(0.5, no_worker_timeout_s / 4))
    next_look = time.monotonic() + look_every
    without_workers_since: float | None = None
    while waiting:
        batch = finished.next_batch(block=False)
        for fut in batch:
            waiting.pop(fut.key, None)
            try:
                fut.result()
            except Exception as exc:  # the shard is not done; the same command retries it
                fail(fut.key, f"{type(exc).__name__}: {exc}")
            else:
                on_done(fut)
            finally:
                fut.release()
        if batch or not waiting:
            continue
        time.sleep(0.1)
        now = time.monotonic()
        if no_worker_timeout_s <= 0 or now < next_look:
            continue
        next_look = now + look_every
        if len(client.nthreads()) > 0:
            without_workers_since = None
            continue
        without_workers_since = without_workers_since or now
        if now - without_workers_since >= no_worker_timeout_s:
            why = (f"the Dask cluster at {client.scheduler.address} has had no worker for "
                   f"{no_worker_timeout_s:g} s (cluster.no_worker_timeout_s): start workers and rerun the same "
                   "command to resume")
            for key in sorted(waiting):
                fail(key, why)
                waiting[key].cancel()
            waiting.clear()
    return failures


def forget_gate(client, gate) -> None:
    """The run's semaphores are dropped at the scheduler once its shards are over (a long-lived scheduler would
    keep one per endpoint and night otherwise)."""
    from distributed import Semaphore

    for _url, sem_name in gate.names:
        try:
            Semaphore(max_leases=gate.max_leases, name=sem_name, scheduler_rpc=client.scheduler,
                      loop=client.loop).close()
        except Exception:  # noqa: BLE001 - bookkeeping only: the run's outcome does not depend on it
            log.debug("could not close semaphore %s", sem_name, exc_info=True)
