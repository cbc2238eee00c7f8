"""A whole run: plan, pick the run (new or resumed), submit shards to Dask, follow progress, record provenance.

Resume: a run is identified by a digest of its candidate-task pairs and of every setting that changes results.
The same command after a crash finds the newest unfinished run with that digest and runs only the shards that have
no done marker; a shard rerun rewrites its own files, so the catalog ends as an uninterrupted run's. ``fresh``
starts a new run instead. One run per root at a time (:class:`~.lock.RootLock`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..catalog import crash_points
from ..catalog.damage import REPAIR_HINT, damage_report, damaged_files
from ..catalog.read import read_manifest, runs_dir
from ..catalog.schema import RUNS_DIR
from ..engines import create_engine, engine_class, engine_in_flight_slots, engine_options
from ..errors import ConfigError, EngineError, RunNotStartedError, SpecVettingError
from ..types import EngineIdentity
from .compact import compact_and_update
from .config import JobConfig, auto_shard_size
from .evidence import attach_evidence, attach_given, open_sources
from .lock import RootLock
from .manifest import RunLog, RunStatus, finish_manifest, plan_counts, start_manifest, utcnow
from .plan import Plan, build_plan, make_shards, plan_digest
from .rollup import merge_small_run, recover_root
from .shard import ShardSpec, renderer_version, run_shard, task_for
from .slots import gate_spec
from .store import RunStore, mark_failed_in_place, write_json_atomic, write_latest_pointer

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


def job_engine_options(job: JobConfig, inflight_per_engine: int) -> dict[str, Any]:
    """The job's engine options, with the per-engine in-flight cap this cluster size gives."""
    return engine_options(job.engine.resolved_name, job.engine.settings(inflight_per_engine))


def first_pictures(items, rerender: bool) -> dict[str, int]:
    """How many pairs are planned to be shown their list's own full view first (``specvi_planned``: SpecVI-Bench
    rows with an ``images`` column) and how many a drawn one (``rendered_planned``). Planned: a row whose cell turns
    out empty is drawn, a broken one is an ERROR row; each verdict's initial_image_source says what happened."""
    own = 0 if rerender else sum(getattr(i.candidate, "image_row", None) is not None for i in items)
    return {"specvi_planned": own, "rendered_planned": len(items) - own}


#: task sources whose prompt text is the one the published model was trained on
TRAINING_PROMPT_SOURCES = ("specvi",)


def prompt_sources(items, tasks_file, task_cache) -> dict[str, int]:
    """How many pairs are asked with which kind of prompt: ``specvi``/``inline`` (the candidate's own, e.g. a
    SpecVI-Bench row's training prompt), ``user`` (a tasks file) or ``builtin`` (texts this project wrote)."""
    counts: dict[str, int] = {}
    for item in items:
        source = task_for(item, tasks_file, task_cache).source
        counts[source] = counts.get(source, 0) + 1
    return dict(sorted(counts.items()))


def builtin_prompt_warning(engine_name: str, sources: dict[str, int]) -> str | None:
    """The loud start-of-run warning when a model engine is given prompts it was not trained on."""
    n_builtin = sources.get("builtin", 0)
    if not n_builtin:
        return None
    return (
        f"WARNING: the {engine_name} engine drives a model, and {n_builtin} of {sum(sources.values())} pair(s) use "
        "the BUILT-IN prompts: texts this project wrote, not the prompts the published Spec-o3 weights were trained "
        "on (only SpecVI-Bench's `prompt` column holds those). Expect results below the paper's. Give each "
        "candidate its training prompt (`spec-vet tasks import-specvi`, or a SpecVI-Bench parquet as the candidate "
        "list) or a tasks file (--tasks-file). The prompt source is recorded in the manifest (prompt_sources)."
    )


def probe_identity(name: str, options: dict[str, Any]) -> EngineIdentity:
    """Engine and model identity before any shard runs (also checks that the engine can start at all).

    An engine whose start is costly (weights) is not started here: that would load them in this process too.
    """
    engine = create_engine(name, **options)
    if getattr(engine, "costly_start", False):
        try:
            return engine.identity()
        except Exception:
            return EngineIdentity(name, "unknown", str(options.get("model_path")))

    async def probe():
        await engine.start()
        try:
            identity = engine.identity()
            checks = getattr(engine, "fidelity_checks", None)
            if checks is not None:  # model engines behind a server: its template and its sampling as training's?
                identity.model_info["fidelity"] = {e: {k: c.as_dict() for k, c in found.items()}
                                                   for e, found in (await checks()).items()}
            return identity
        finally:
            await engine.close()

    try:
        return asyncio.run(probe())
    except EngineError as exc:  # no endpoint healthy, a probe cut at its deadline ...: before any run exists
        raise RunNotStartedError(f"the {name} engine could not start: {exc}") from exc
    except SpecVettingError:
        raise
    except Exception as exc:
        raise RunNotStartedError(f"the {name} engine did not start: {exc}; check the endpoints") from exc


def _identity_before_start(job: JobConfig, name: str) -> EngineIdentity:
    """:func:`probe_identity` of the job's engine; any failure but a ConfigError is a RunNotStartedError."""
    try:
        # per-engine in-flight cap, fixed by the cluster size; known before the identity probe uses it
        return probe_identity(name, job_engine_options(job, job.max_inflight_per_endpoint))
    except (ConfigError, RunNotStartedError):
        raise
    except SpecVettingError as exc:
        raise RunNotStartedError(f"the {name} engine did not start: {exc}") from exc


def _claim_root(root: Path) -> RootLock:
    """The catalog root created (with its parents) and locked for this run; a folder that cannot be written is a
    ConfigError (exit 2: no rerun fixes it)."""
    def refused(why: str) -> ConfigError:
        return ConfigError(f"{root}: cannot use this folder as the catalog root ({why}); pass --out a folder you "
                           "can write to (it is created if missing)")

    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / RUNS_DIR).mkdir(exist_ok=True)
    except OSError as exc:
        raise refused(exc.strerror or str(exc)) from exc
    if not os.access(root, os.W_OK | os.X_OK) or not os.access(root / RUNS_DIR, os.W_OK | os.X_OK):
        raise refused("Permission denied")
    lock = RootLock(root)
    try:
        lock.acquire()
    except OSError as exc:
        raise refused(exc.strerror or str(exc)) from exc
    return lock


def check_fidelity(job: JobConfig, identity: EngineIdentity, echo) -> None:
    """Refuse endpoints whose chat template is not training's, or that refuse a pinned sampling field (exit 2),
    unless the job allows it (then refused fields are left out of that endpoint's requests, recorded in the job's
    engine options); say which could not be checked. The checks are in ``identity.model_info["fidelity"]``
    (recorded in the manifest)."""
    checks = identity.model_info.get("fidelity") or {}
    inexact: dict[str, str] = {}
    refused: dict[str, list[str]] = {}
    for e, found in checks.items():
        rendering, sampling = found.get("rendering") or {}, found.get("sampling") or {}
        if rendering.get("exact") is False:
            inexact[e] = rendering["detail"]
        elif rendering.get("exact") is None:
            echo(f"warning: {e}: {rendering.get('detail')}")
        if sampling.get("accepted") is False:
            inexact[e] = "; ".join(x for x in (inexact.get(e), sampling["detail"]) if x)
            refused[e] = list(sampling.get("refused") or [])
    if not inexact:
        return
    lines = "; ".join(f"{e}: {d}" for e, d in inexact.items())
    if job.engine.allow_inexact_template:
        echo(f"warning: running where the model is not driven as trained (--allow-inexact-template): {lines}")
        if refused:
            job.engine.options["omit_sampling"] = refused
        return
    raise ConfigError(f"{len(inexact)} endpoint(s) would not drive the model as it was trained: {lines}. Restart "
                      "them as deploy/vllm/launch.sh or deploy/sglang/launch.sh do (the shipped chat template, vLLM "
                      "or SGLang), or pass --allow-inexact-template to run anyway (recorded in the run's manifest)")


def _identity_key(engine: str | None, engine_version: str | None, model: str | None) -> tuple:
    # the rules engine has no model: its version is what makes its verdicts comparable
    return (engine, model if model is not None else engine_version)


#: ERROR kinds that another try cannot change while the file stays as it is (a layout no reader knows, or one that
#: is refused, like LAMOST MRS): an incremental run does not retry them every night, unless the file changed
PERMANENT_ERROR_KINDS = frozenset({"unsupported_format"})


def _unchanged_since(path: str | None, started_at) -> bool:
    """True when ``path`` exists and was last modified before ``started_at`` (the earlier inspection's start)."""
    if not path or started_at is None:
        return False
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    return mtime < started_at.timestamp()


def _permanent_errors(root: Path, identity: EngineIdentity, exclude_run: str | None,
                      wanted: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Which of ``wanted`` ended, with this engine and model, in a permanent ERROR (:data:`PERMANENT_ERROR_KINDS`)
    whose file has not been modified since: another try would give the same error, so it is not retried.

    Read from the current view, not the history: a pair's current row is an ERROR exactly when it never got an
    answer, and it is the latest such ERROR (a later error of another kind means the file reads differently now)."""
    import pyarrow.compute as pc

    from ..catalog.read import dataset

    current = dataset(root, "current")
    if current is None or not wanted:
        return set()
    flt = (_identity_filter(identity) & (pc.field("verdict") == "ERROR")
           & pc.field("error_kind").isin(sorted(PERMANENT_ERROR_KINDS))
           & pc.field("candidate_id").isin(sorted({w[0] for w in wanted})))
    if exclude_run is not None:
        flt = flt & (pc.field("run_id") != exclude_run)
    rows = current.to_table(columns=["candidate_id", "task", "prompt_version", "path", "started_at"], filter=flt)
    return {key for r in rows.to_pylist()
            if (key := (r["candidate_id"], r["task"], r["prompt_version"])) in wanted
            and _unchanged_since(r["path"], r["started_at"])}


def _identity_filter(identity: EngineIdentity):
    import pyarrow.compute as pc

    flt = pc.field("engine") == identity.engine
    if identity.model is not None:
        return flt & (pc.field("model") == identity.model)
    return flt & pc.field("model").is_null() & (pc.field("engine_version") == identity.engine_version)


def already_vetted(
    root: Path, identity: EngineIdentity, exclude_run: str | None, wanted: set[tuple[str, str, str]]
) -> set[tuple[str, str, str]]:
    """Which of ``wanted`` (candidate_id, task, prompt_version) were vetted (verdict not ERROR) by this engine and
    model in earlier runs. Reads key columns only: the current view first, then, for the few pairs whose current
    row came from another model or prompt, the history (filtered by candidate id)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..catalog.read import dataset

    if not wanted:
        return set()
    keys = ["candidate_id", "task", "prompt_version"]
    w = pa.table({k: pa.array([t[i] for t in wanted], pa.string()) for i, k in enumerate(keys)})
    ok = _identity_filter(identity) & (pc.field("verdict") != "ERROR")
    if exclude_run is not None:
        ok = ok & (pc.field("run_id") != exclude_run)
    found: list[pa.Table] = []
    rest = w
    current = dataset(root, "current")
    if current is not None:
        in_list = pc.field("candidate_id").isin(pc.unique(w.column("candidate_id")))
        cur = current.to_table(columns=keys, filter=in_list & ok)
        found.append(w.join(cur.group_by(keys).aggregate([]), keys, join_type="inner"))
        # pairs whose current row is an answer of another model or prompt: an earlier run may have vetted them with
        # this one (a pair whose current row is an ERROR never got an answer from any run: not in the history)
        answered = current.to_table(columns=["candidate_id", "task"], filter=in_list & (pc.field("verdict") != "ERROR"))
        rest = (w.join(found[0], keys, join_type="left anti")
                .join(answered, ["candidate_id", "task"], join_type="left semi"))
    verdicts = dataset(root, "verdicts")
    if verdicts is not None and rest.num_rows:
        in_rest = pc.field("candidate_id").isin(pc.unique(rest.column("candidate_id")))
        hist = verdicts.to_table(columns=keys, filter=in_rest & ok)
        found.append(rest.join(hist.group_by(keys).aggregate([]), keys, join_type="inner"))
    done: set[tuple[str, str, str]] = set()
    for t in found:
        done.update(zip(*(t.column(k).to_pylist() for k in keys), strict=True))
    done.update(_permanent_errors(root, identity, exclude_run, wanted))
    return done


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


# ---------------------------------------------------------------------------------------------------- the run


def _progress(total: int, initial: int, enabled: bool | None):
    from tqdm import tqdm

    disable = (not sys.stderr.isatty()) if enabled is None else not enabled
    return tqdm(total=total, initial=initial, unit="insp", desc="inspections", disable=disable, dynamic_ncols=True)


def run_job(
    job: JobConfig,
    *,
    fresh: bool = False,
    progress: bool | None = None,
    echo: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> RunOutcome:
    """Run (or resume) a job to the end. Raises ConfigError (usage), RunLockedError / RunFailedError (exit 1)."""
    from ..inspect.tasks import get_task

    root = Path(job.out).resolve()
    wall0 = time.perf_counter()

    def resolve(key: str) -> str:
        return get_task(key, job.tasks_file).key

    try:
        candidates = load_all_candidates(job.candidates)
    except SpecVettingError as exc:
        raise ConfigError(f"candidate list: {exc}") from exc
    plan: Plan = build_plan(candidates, job.tasks, resolve)
    if plan.skipped_task_not_selected:
        echo(f"note: {plan.skipped_task_not_selected} candidate row(s) name a task outside --task and are skipped")
    if not plan.items:
        # an empty incoming folder is a normal night: no run is recorded, exit 0
        why = "the candidate sources list no candidate" if not candidates else "no candidate-task pair is selected"
        return RunOutcome("", (job.run_date or dt.date.today()).isoformat(), str(root), "nothing_to_do", False,
                          {"n_verdicts": 0, "reason": why})

    # every evidence catalog opened and checked before anything is started (a bad one: ConfigError, exit 2)
    opened = open_sources(job.evidence)
    name = job.engine.resolved_name
    # the engine's start-up probes (health, model, template, sampling), each bounded by the request deadline, before
    # the root is touched or locked: a refused or failed start leaves no folder and does not hold the next night up
    identity = _identity_before_start(job, name)
    check_fidelity(job, identity, echo)
    lock = _claim_root(root)
    try:
        _recover(root, echo)
        rversion = renderer_version()
        task_cache: dict = {}
        shard_size = auto_shard_size(job, len(plan.items))
        settings = {
            "engine": name,
            "identity": [identity.engine, identity.engine_version, identity.model],
            "sampling": job.sampling.model_dump(mode="json"),
            "budgets": job.budgets.model_dump(mode="json"),
            "title": job.title,
            "renderer_version": rversion,
            "shard_size": shard_size,
            "incremental": job.incremental,
            "prompts": sorted({(i.task, task_for(i, job.tasks_file, task_cache).version) for i in plan.items}),
            # only with evidence: runs without it keep the digest they had
            **({"evidence": [s.model_dump(mode="json") for s in job.evidence]} if job.evidence else {}),
            **({"evidence_prompt": True} if job.evidence_prompt else {}),
        }
        images = first_pictures(plan.items, job.specvi_rerender)
        if any(getattr(i.candidate, "image_row", None) is not None for i in plan.items):
            settings["specvi_rerender"] = job.specvi_rerender  # only here: other runs keep the digest they had
        digest = plan_digest(plan.items, settings)
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
            items, skipped_incremental = _skip_vetted(job, root, store, identity, items, previous, task_cache)
        shards = make_shards(items, shard_size)
        store.remove_temporaries()
        done = store.done_markers()
        store.remove_unfinished_parts(done)
        pending = [s for s in shards if s.shard_id not in done]
        n_done_items = sum(len(s.items) for s in shards if s.shard_id in done)
        sources = prompt_sources(plan.items, job.tasks_file, task_cache)
        drives_model = getattr(engine_class(name), "drives_model", True)
        warning = builtin_prompt_warning(name, sources) if drives_model else None
        if warning:
            echo(warning)
            log.warning(warning)

        counts = plan_counts(
            plan, n_candidates=len(candidates), n_pairs=len(items), n_shards=len(shards), shard_size=shard_size,
            skipped_incremental=skipped_incremental,
        )
        manifest = start_manifest(
            previous, run_id=run_id, run_date=run_date, digest=digest, job=job, identity=identity,
            tasks={t: get_task(t, job.tasks_file) for t in plan.tasks}, renderer_version=rversion, counts=counts,
            pending_shards=len(pending),
        )
        # where the prompt texts came from: builtin = written by this project, not what the model was trained on
        manifest["prompt_sources"], manifest["prompt_warning"] = sources, warning
        manifest["first_pictures"] = images  # SpecVI-Bench's own full views or drawn ones (initial_image_source)
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

        _warn_damaged(root, echo, runlog)
        attempt = _Attempt(store, manifest, runlog, shards)
        failures = attempt.run_shards(
            lambda: _execute(job, store, identity, pending, len(items), n_done_items, progress, echo, runlog,
                             opened, manifest))

        markers = store.done_markers()
        shard_ids = {s.shard_id for s in shards}
        summary = summarize({k: v for k, v in markers.items() if k in shard_ids})
        # only finished shards' rows reach the catalog: compacted into few files, then folded into current/
        t_compact = time.perf_counter()
        summary["compaction"], reason = attempt.update_catalog(set(markers) & shard_ids)
        crash_points.reached("fold:done")
        if reason:
            return RunOutcome(run_id, run_date, str(root), "catalog_update_failed", bool(previous), summary, [reason])
        summary["compaction"]["wall_s"] = round(time.perf_counter() - t_compact, 3)
        wall = time.perf_counter() - wall0
        done_now = sum(len(s.items) for s in pending if s.shard_id in markers)
        summary["wall_s"] = round(wall, 3)
        summary["inspections_this_attempt"] = done_now
        summary["throughput_per_s"] = round(done_now / wall, 3) if wall > 0 else None
        summary["skipped_incremental"] = skipped_incremental
        finish_manifest(manifest, summary, wall_s=wall, inspections=done_now, failures=failures)
        _write_end(store, manifest)
        if failures:
            runlog.write("ERROR", f"FAILED run {run_id}: {len(failures)} shard(s) failed; first: {failures[0]}")
            return RunOutcome(run_id, run_date, str(root), "failed", bool(previous), summary, failures)
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
            return RunOutcome(run_id, run_date, str(root), "error_rate_exceeded", bool(previous), summary, [msg])
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
        return RunOutcome(run_id, run_date, str(root), "finished", bool(previous), summary)
    finally:
        lock.release()


def _recover(root: Path, echo) -> None:
    """What a crash left of an earlier run's end (a month merge, a write) finished before this run writes
    (:func:`.rollup.recover_root`); a failure here is said and the run goes on (the files stay as they were)."""
    try:
        for line in recover_root(root):
            echo(f"recovered: {line}")
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("recovering what a crash left under %s failed: %s", root, exc, exc_info=True)
        echo(f"warning: recovering what a crash left under {root} failed ({_one_line(exc)}); "
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


def _skip_vetted(job, root: Path, store: RunStore, identity, items, previous, task_cache: dict) -> tuple[list, int]:
    """An incremental run's pairs still to inspect, and how many it skips as vetted already with this model and
    prompt version. The skipped set is recorded with the run on its first attempt; a resumed attempt reads it back."""
    skips = store.read_incremental_skips() if previous else None
    if skips is None:
        asked = {(*i.key, task_for(i, job.tasks_file, task_cache).version) for i in items}
        vetted = already_vetted(root, identity, exclude_run=store.run_id, wanted=asked)
        skips = {
            i.key for i in items
            if (*i.key, task_for(i, job.tasks_file, task_cache).version) in vetted
        }
        store.write_incremental_skips(skips)
    keep = [i for i in items if i.key not in skips]
    return keep, len(items) - len(keep)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}".rstrip(": ")


def _warn_damaged(root: Path, echo, runlog) -> None:
    """Damaged files already under the root are left out of every read (the run goes on); say which."""
    for line in damage_report(root):
        echo(f"warning: {line}")
        runlog.write("WARNING", line)


def _catalog_update_failure(root: Path, exc: Exception, n_done: int, n_shards: int) -> str:
    """The one-line reason a run's compaction or current-view update failed, naming the damaged files when that
    is the cause, and what to do; how many shards did write their verdicts (staged), not a blanket "written"."""
    what = (f"{n_done} of {n_shards} shard(s) wrote their verdicts (staged, kept for the rerun) but the catalog "
            "could not be updated")
    damaged = damaged_files(root)
    if damaged:
        return (f"{what}: {'; '.join(d.line() for d in damaged)} ({_one_line(exc)}); "
                f"{REPAIR_HINT.format(root=root)}, then rerun the same command")
    return f"{what}: {_one_line(exc)}; fix that, then rerun the same command (it compacts the finished shards again)"


@dataclass
class _Attempt:
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
            _record_interruption(exc, self.store, self.manifest, self.shards, self.runlog, self.store.run_id)
            raise
        except BaseException as exc:
            _record_failure(self.store, self.manifest, self.runlog, self.store.run_id,
                            f"the shards could not run: {_one_line(exc)}")
            raise

    def update_catalog(self, done: set[str]) -> tuple[dict, str | None]:
        """(compaction stats, None), or ({}, the reason) after recording the failure."""
        store = self.store
        try:
            return compact_and_update(store.root, store.run_id, store.run_date, done), None
        except Exception as exc:
            reason = _catalog_update_failure(Path(store.root), exc, len(done), len(self.shards))
            _record_failure(store, self.manifest, self.runlog, store.run_id, reason)
            return {}, reason


def _write_end(store: RunStore, manifest: dict) -> None:
    """The manifest at the attempt's end; when a full disk refuses it, its status is still turned from running to
    failed in place before the error goes on up."""
    try:
        write_json_atomic(store.manifest_path, manifest)
    except OSError:
        mark_failed_in_place(store.manifest_path)
        raise


def _record_failure(store: RunStore, manifest: dict, runlog, run_id: str, reason: str) -> None:
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


def _record_interruption(exc: BaseException, store: RunStore, manifest: dict, shards, runlog, run_id: str) -> None:
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


def _run_evidence(store: RunStore, opened, pending, echo, runlog, manifest: dict | None) -> None:
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


def _execute(job, store: RunStore, identity, pending, total_items, done_items, progress, echo, runlog,
             opened=(), manifest: dict | None = None) -> list[str]:
    """Cross-match the pending shards' candidates with the evidence catalogs (``opened``) on the run's cluster,
    then submit the shards and follow them; returns failure messages (empty = all done)."""
    if not pending:
        return []
    from .cluster import dask_client

    name = job.engine.resolved_name
    cap = job.max_inflight_per_endpoint
    options = job_engine_options(job, cap)
    slots = engine_in_flight_slots(name, options)
    capped = slots is not None
    with dask_client(job.cluster, len(pending), cap if capped else None) as (client, n_workers, note):
        if note:
            echo(f"note: {note}")
            runlog.write("INFO", note)
        link = client.dashboard_link if job.cluster.dashboard is not False else None
        if job.cluster.dashboard and link:  # asked for with --dashboard: a line that stays
            echo(f"Dask dashboard: {link}")
        if opened:
            _run_evidence(store, opened, pending, echo, runlog, manifest)
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
        bar = _progress(total_items, done_items, progress)
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
            _forget_gate(client, gate)
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

    def fail(key: str, why: str) -> None:
        msg = f"{key}: {why}"
        failures.append(msg)
        runlog.write("ERROR", f"shard failed: {msg}")
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


def _forget_gate(client, gate) -> None:
    """The run's semaphores are dropped at the scheduler once its shards are over (a long-lived scheduler would
    keep one per endpoint and night otherwise)."""
    from distributed import Semaphore

    for _url, sem_name in gate.names:
        try:
            Semaphore(max_leases=gate.max_leases, name=sem_name, scheduler_rpc=client.scheduler,
                      loop=client.loop).close()
        except Exception:  # noqa: BLE001 - bookkeeping only: the run's outcome does not depend on it
            log.debug("could not close semaphore %s", sem_name, exc_info=True)
