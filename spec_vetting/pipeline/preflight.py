"""Before a run takes its root: the engine's identity and start-up probes, the fidelity checks of its endpoints,
where the prompts and first pictures come from, and the root claimed (created and locked) only once all of that
passed. A refused or failed start writes nothing."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from ..catalog.schema import RUNS_DIR
from ..engines import EngineChoice
from ..errors import ConfigError, EngineError, RunNotStartedError, SpecVettingError
from ..types import EngineIdentity
from .config import JobConfig
from .lock import RootLock
from .shard import task_for

log = logging.getLogger(__name__)


def job_engine_options(job: JobConfig, engine: EngineChoice, inflight_per_engine: int) -> dict[str, Any]:
    """The job's engine options, with the per-engine in-flight cap this cluster size gives."""
    return engine.options(job.engine.settings(inflight_per_engine))


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


def probe_identity(choice: EngineChoice, options: dict[str, Any]) -> EngineIdentity:
    """Engine and model identity before any shard runs (also checks that the engine can start at all).

    An engine whose start is costly (weights) is not started here: that would load them in this process too.
    """
    name = choice.name
    engine = choice.create(**options)
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


def identity_before_start(job: JobConfig, engine: EngineChoice) -> EngineIdentity:
    """:func:`probe_identity` of the job's engine; any failure but a ConfigError is a RunNotStartedError."""
    name = engine.name
    try:
        # per-engine in-flight cap, fixed by the cluster size; known before the identity probe uses it
        return probe_identity(engine, job_engine_options(job, engine, job.max_inflight_per_endpoint))
    except (ConfigError, RunNotStartedError):
        raise
    except SpecVettingError as exc:
        raise RunNotStartedError(f"the {name} engine did not start: {exc}") from exc


def claim_root(root: Path) -> RootLock:
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
