"""A whole run: plan, pick the run (new or resumed), submit shards to Dask, follow progress, record provenance.

Resume: a run is identified by a digest of its candidate-task pairs and of every setting that changes results.
The same command after a crash finds the newest unfinished run with that digest and runs only the shards that have
no done marker; a shard rerun rewrites its own files, so the catalog ends as an uninterrupted run's. ``fresh``
starts a new run instead. One run per root at a time (:class:`~.lock.RootLock`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..catalog import crash_points
from ..catalog.listing import read_manifest, runs_dir
from ..engines import EngineChoice
from ..errors import ConfigError, SpecVettingError, one_line
from .config import JobConfig, auto_shard_size
from .evidence import open_sources
from .execute import Attempt, execute_shards, summarize, warn_damaged, write_end
from .incremental import skip_vetted
from .manifest import RunLog, finish_manifest, plan_counts, start_manifest
from .plan import Plan, build_plan, make_shards, plan_digest
from .preflight import (
    builtin_prompt_warning,
    check_fidelity,
    claim_root,
    first_pictures,
    identity_before_start,
    prompt_sources,
)
from .rollup import merge_small_run, recover_root
from .shard import renderer_version, task_for
from .store import RunStore, write_json_atomic, write_latest_pointer

log = logging.getLogger(__name__)


#: how :func:`run_job` ended: "finished" | "failed" (shards) | "catalog_update_failed" (compaction or current/
#: failed) | "nothing_to_do" | "error_rate_exceeded" (finished, too many ERROR rows); not the manifest's
#: :data:`~spec_vetting.pipeline.manifest.RunStatus`
OutcomeStatus = Literal["finished", "failed", "catalog_update_failed", "nothing_to_do", "error_rate_exceeded"]


@dataclass
class RunOutcome:
    run_id: str
    run_date: str
    root: str
    status: OutcomeStatus
    resumed: bool
    summary: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def manifest_path(self) -> str:
        return str(runs_dir(self.root) / self.run_id / "manifest.json")


# ---------------------------------------------------------------------------------------------------- planning


def load_all_candidates(sources: list[str]) -> list:
    from ..io.candidates import load_candidates

    out = []
    for source in sources:
        out.extend(load_candidates(source))
    return out


def finished_run_with(root: Path, digest: str) -> dict | None:
    """The manifest of the latest finished run with this plan digest (same inputs and settings), or None."""
    if not runs_dir(root).is_dir():
        return None
    found = []
    for d in runs_dir(root).iterdir():
        try:
            m = read_manifest(root, d.name) if (d / "manifest.json").is_file() else None
        except (OSError, ValueError):
            continue
        if m and m.get("status") == "finished" and m.get("plan_digest") == digest:
            found.append(m)
    return max(found, key=lambda m: (m.get("started_at") or "", m["run_id"])) if found else None


# ---------------------------------------------------------------------------------------------------- run choice


def _new_run_id(root: Path, digest: str) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{stamp}-{digest[:6]}"
    if (runs_dir(root) / run_id).exists():
        run_id = f"{run_id}-{uuid.uuid4().hex[:4]}"
    return run_id


def choose_run(root: Path, job: JobConfig, digest: str, fresh: bool) -> tuple[str, str, dict | None]:
    """(run_id, run_date, manifest of the run being resumed or None)."""
    today = (job.run_date or dt.date.today()).isoformat()
    if job.run_id:
        path = runs_dir(root) / job.run_id / "manifest.json"
        if not path.exists():
            return job.run_id, today, None
        m = read_manifest(root, job.run_id)
        if m.get("status") == "finished" or fresh:
            raise ConfigError(
                f"{root}: run {job.run_id} already exists ({m.get('status')}); runs are never overwritten: "
                "choose another --run-id, or omit it to get a new one"
            )
        if m.get("plan_digest") != digest:
            raise ConfigError(
                f"{root}: run {job.run_id} is unfinished but was started with other inputs or settings; rerun it "
                "with its original job, or use --fresh without --run-id to start a new run"
            )
        return job.run_id, m["run_date"], m
    if not fresh and runs_dir(root).is_dir():
        candidates = []
        for d in runs_dir(root).iterdir():
            if not (d / "manifest.json").is_file():
                continue
            try:
                m = read_manifest(root, d.name)
            except (OSError, ValueError):
                continue
            if m.get("status") != "finished" and m.get("plan_digest") == digest:
                candidates.append(m)
        if candidates:
            m = max(candidates, key=lambda m: (m.get("started_at") or "", m["run_id"]))
            return m["run_id"], m["run_date"], m
    return _new_run_id(root, digest), today, None


# ---------------------------------------------------------------------------------------------------- summary


# ---------------------------------------------------------------------------------------------------- the run


def run_job(
    job: JobConfig,
    *,
    fresh: bool = False,
    progress: bool | None = None,
    echo: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> RunOutcome:
    """Run (or resume) a job to the end. Raises ConfigError (usage), RunLockedError / RunFailedError (exit 1)."""
    root = Path(job.out).resolve()
    wall0 = time.perf_counter()
    try:
        candidates = load_all_candidates(job.candidates)
    except SpecVettingError as exc:
        raise ConfigError(f"candidate list: {exc}") from exc
    plan = _plan(job, candidates, echo)
    if not plan.items:
        # an empty incoming folder is a normal night: no run is recorded, exit 0
        why = "the candidate sources list no candidate" if not candidates else "no candidate-task pair is selected"
        return RunOutcome("", (job.run_date or dt.date.today()).isoformat(), str(root), "nothing_to_do", False,
                          {"n_verdicts": 0, "reason": why})
    # every evidence catalog opened and checked before anything is started (a bad one: ConfigError, exit 2)
    opened = open_sources(job.evidence)
    # the engine's start-up probes (health, model, template, sampling), each bounded by the request deadline, before
    # the root is touched or locked: a refused or failed start leaves no folder and does not hold the next night up
    engine = EngineChoice.named(job.engine.resolved_name)  # resolved once; what follows is handed this value
    identity = identity_before_start(job, engine)
    check_fidelity(job, identity, echo)
    lock = claim_root(root)
    try:
        _recover(root, echo)
        run = _start(job, engine, root, plan, len(candidates), identity, fresh, echo)
        if isinstance(run, RunOutcome):
            return run
        failures = run.attempt.run_shards(
            lambda: execute_shards(job, engine, run.store, identity, run.pending, len(run.items), run.n_done_items,
                                   progress, echo, run.runlog, opened, run.manifest))
        return _finish(job, run, failures, wall0)
    finally:
        lock.release()


def _plan(job: JobConfig, candidates: list, echo) -> Plan:
    from ..inspect.tasks import get_task

    plan = build_plan(candidates, job.tasks, lambda key: get_task(key, job.tasks_file).key)
    if plan.skipped_task_not_selected:
        echo(f"note: {plan.skipped_task_not_selected} candidate row(s) name a task outside --task and are skipped")
    return plan


@dataclass
class _Started:
    """A run chosen, its manifest written and its attempt begun: what the execution and the end need."""

    run_id: str
    run_date: str
    resumed: bool
    store: RunStore
    runlog: RunLog
    manifest: dict
    attempt: Attempt
    shards: list
    pending: list
    items: list
    n_done_items: int
    skipped_incremental: int


def _settings(job: JobConfig, engine: EngineChoice, plan: Plan, identity, shard_size: int, rversion: str,
              task_cache: dict) -> dict:
    """Every setting that changes results, for the plan's digest (runs without evidence keep the digest they had)."""
    settings = {
        "engine": engine.name,
        "identity": [identity.engine, identity.engine_version, identity.model],
        "sampling": job.sampling.model_dump(mode="json"),
        # how files are read (in which processes) changes no result: a resume may change it
        "budgets": job.budgets.model_dump(mode="json", exclude={"read_processes", "read_memory_mb"}),
        "title": job.title,
        "renderer_version": rversion,
        "shard_size": shard_size,
        "incremental": job.incremental,
        "prompts": sorted({(i.task, task_for(i, job.tasks_file, task_cache).version) for i in plan.items}),
        **({"evidence": [s.model_dump(mode="json") for s in job.evidence]} if job.evidence else {}),
        **({"evidence_prompt": True} if job.evidence_prompt else {}),
    }
    if any(getattr(i.candidate, "image_row", None) is not None for i in plan.items):
        settings["specvi_rerender"] = job.specvi_rerender  # only here: other runs keep the digest they had
    return settings


def _start(job: JobConfig, engine: EngineChoice, root: Path, plan: Plan, n_candidates: int, identity, fresh: bool,
           echo) -> _Started | RunOutcome:
    """Choose the run (new or resumed), skip what is done, write the manifest and say what starts; a RunOutcome
    when this command already ran to the end with these inputs."""
    from ..inspect.tasks import get_task

    rversion = renderer_version()
    task_cache: dict = {}
    shard_size = auto_shard_size(job, len(plan.items), engine)
    digest = plan_digest(plan.items, _settings(job, engine, plan, identity, shard_size, rversion, task_cache))
    run_id, run_date, previous = choose_run(root, job, digest, fresh)
    same = None if (fresh or job.run_id or previous) else finished_run_with(root, digest)
    if same is not None:  # idempotent: this command already ran to the end with these inputs
        echo(f"nothing to do: run {same['run_id']} already finished with the same inputs and settings "
             "(--fresh starts a new run)")
        return RunOutcome(same["run_id"], same["run_date"], str(root), "nothing_to_do", False,
                          {"n_verdicts": 0, "finished_run": same["run_id"]})
    store = RunStore(root, run_id, run_date)
    runlog = RunLog(store.log_path)

    items = plan.items
    skipped_incremental = 0
    if job.incremental:
        items, skipped_incremental = skip_vetted(job, root, store, identity, items, previous, task_cache)
    shards = make_shards(items, shard_size)
    store.remove_temporaries()
    done = store.done_markers()
    store.remove_unfinished_parts(done)
    pending = [s for s in shards if s.shard_id not in done]
    n_done_items = sum(len(s.items) for s in shards if s.shard_id in done)
    sources = prompt_sources(plan.items, job.tasks_file, task_cache)
    warning = builtin_prompt_warning(engine.name, sources) if engine.drives_model else None
    if warning:
        echo(warning)
        log.warning(warning)

    counts = plan_counts(
        plan, n_candidates=n_candidates, n_pairs=len(items), n_shards=len(shards), shard_size=shard_size,
        skipped_incremental=skipped_incremental,
    )
    manifest = start_manifest(
        previous, run_id=run_id, run_date=run_date, digest=digest, job=job, identity=identity,
        tasks={t: get_task(t, job.tasks_file) for t in plan.tasks}, renderer_version=rversion, counts=counts,
        pending_shards=len(pending),
    )
    # where the prompt texts came from: builtin = written by this project, not what the model was trained on
    manifest["prompt_sources"], manifest["prompt_warning"] = sources, warning
    # SpecVI-Bench's own full views or drawn ones (initial_image_source)
    manifest["first_pictures"] = first_pictures(plan.items, job.specvi_rerender)
    manifest["evidence_prompt"] = job.evidence_prompt  # the task text with the evidence sentence, or as trained
    write_json_atomic(store.manifest_path, manifest)
    write_latest_pointer(root, run_id)
    verb = "RESUME" if previous else "START"
    runlog.write(
        "INFO",
        f"{verb} run {run_id} attempt {len(manifest['attempts'])}: {len(items)} pairs in {len(shards)} shards, "
        f"{len(pending)} to do; engine {identity.engine} model {identity.model}; pid {os.getpid()}",
    )
    if previous:
        echo(f"resuming run {run_id}: {len(shards) - len(pending)} of {len(shards)} shards already done")
    else:
        echo(f"run {run_id}: {len(items)} inspections in {len(shards)} shards -> {root}")
    if skipped_incremental:
        echo(f"incremental: {skipped_incremental} pair(s) already vetted with this model and prompt, skipped")
    warn_damaged(root, echo, runlog)
    return _Started(run_id, run_date, bool(previous), store, runlog, manifest, Attempt(store, manifest, runlog, shards),
                    shards, pending, items, n_done_items, skipped_incremental)


def _finish(job: JobConfig, run: _Started, failures: list[str], wall0: float) -> RunOutcome:
    """The catalog updated from the finished shards, the manifest and run.log closed, small files merged."""
    store, manifest, runlog, run_id, run_date = run.store, run.manifest, run.runlog, run.run_id, run.run_date
    root = store.root

    def outcome(status: OutcomeStatus, failures_=()) -> RunOutcome:
        return RunOutcome(run_id, run_date, str(root), status, run.resumed, summary, list(failures_))

    markers = store.done_markers()
    shard_ids = {s.shard_id for s in run.shards}
    summary = summarize({k: v for k, v in markers.items() if k in shard_ids})
    # only finished shards' rows reach the catalog: compacted into few files, then folded into current/
    t_compact = time.perf_counter()
    summary["compaction"], reason = run.attempt.update_catalog(set(markers) & shard_ids)
    crash_points.reached("fold:done")
    if reason:
        return outcome("catalog_update_failed", [reason])
    summary["compaction"]["wall_s"] = round(time.perf_counter() - t_compact, 3)
    wall = time.perf_counter() - wall0
    done_now = sum(len(s.items) for s in run.pending if s.shard_id in markers)
    summary["wall_s"] = round(wall, 3)
    summary["inspections_this_attempt"] = done_now
    summary["throughput_per_s"] = round(done_now / wall, 3) if wall > 0 else None
    summary["skipped_incremental"] = run.skipped_incremental
    finish_manifest(manifest, summary, wall_s=wall, inspections=done_now, failures=failures)
    write_end(store, manifest)
    if failures:
        runlog.write("ERROR", f"FAILED run {run_id}: {len(failures)} shard(s) failed; first: {failures[0]}")
        return outcome("failed", failures)
    n_errors = sum(c.get("ERROR", 0) for c in summary["verdicts_by_task"].values())
    rate = n_errors / summary["n_verdicts"] if summary["n_verdicts"] else 0.0
    summary["error_rate"] = round(rate, 4)
    manifest["counts"]["error_rate"] = summary["error_rate"]
    if job.max_error_rate is not None and rate > job.max_error_rate:
        msg = (f"{n_errors} of {summary['n_verdicts']} verdicts are ERROR ({rate:.1%}), above max_error_rate "
               f"{job.max_error_rate:g}; errors {summary['errors_by_kind']}")
        manifest["error_rate_exceeded"] = msg
        write_json_atomic(store.manifest_path, manifest)
        write_latest_pointer(root, run_id)
        runlog.write("ERROR", f"FAILED run {run_id}: {msg}")
        return outcome("error_rate_exceeded", [msg])
    write_json_atomic(store.manifest_path, manifest)
    write_latest_pointer(root, run_id)
    crash_points.reached("finished")
    store.remove_parts()  # compacted, and the run is finished: nothing reads them any more
    crash_points.reached("parts-removed")
    _merge_small_files(root, run_id, run_date, runlog, job.merge_small_nights)
    runlog.write(
        "INFO",
        f"SUCCESS run {run_id}: {summary['n_verdicts']} verdicts, errors {summary['errors_by_kind'] or 'none'}, "
        f"{summary['wall_s']} s",
    )
    return outcome("finished")


def _recover(root: Path, echo) -> None:
    """What a crash left of an earlier run's end (a month merge, a write) finished before this run writes
    (:func:`.rollup.recover_root`); a failure here is said and the run goes on (the files stay as they were)."""
    try:
        for line in recover_root(root):
            echo(f"recovered: {line}")
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("recovering what a crash left under %s failed: %s", root, exc, exc_info=True)
        echo(f"warning: recovering what a crash left under {root} failed ({one_line(exc)}); "
             f"`spec-vet catalog compact {root}` tries again")


def _merge_small_files(root: Path, run_id: str, run_date: str, runlog, wanted: bool) -> None:
    """A finished night's small files into its month's (:mod:`.rollup`), when the job asks for it. The run's rows
    are in the catalog either way, so a failure here is logged, not the run's: the next run or ``catalog compact``
    recovers it."""
    if not wanted:
        return
    try:
        merge_small_run(root, run_id, run_date)
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("merging run %s's small files into the month's failed: %s", run_id, exc, exc_info=True)
        runlog.write("WARNING", f"merging the run's small files into the month's failed: {exc}")


