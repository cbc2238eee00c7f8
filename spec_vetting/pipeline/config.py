"""The job file: what `spec-vet run` does, as a pydantic schema with a description per field.

A job file is YAML; every field has a default except ``candidates`` and ``out``. ``spec-vet run --example`` prints
a commented example (``example_job.yaml`` beside this module; a test keeps it and this schema in sync). Relative
paths in a job file are relative to the file's folder. Environment variables override any field:
``SPEC_VETTING_JOB__<FIELD>[__<SUBFIELD>]`` with a YAML value, e.g. ``SPEC_VETTING_JOB__ENGINE__MODEL=spec-o3``
or ``SPEC_VETTING_JOB__SHARD_SIZE=50`` (handy in cron and containers).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..engines import ENGINES, EngineChoice, default_engine
from ..engines.http import DEFAULT_API_KEY_ENV, DEFAULT_TIMEOUT_S
from ..errors import ConfigError
from ..evidence.sources import EvidenceSource, check_unique
from ..inspect.loop import DEFAULT_ENDPOINT_RETRIES, DEFAULT_TIME_BUDGET_S
from ..io.read_pool import DEFAULT_READ_MEMORY_MB, DEFAULT_READ_PROCESSES
from ..protocol import MAX_ASSISTANT_TURNS
from ..types import EngineSettings, Sampling
from ..yaml_file import read_yaml_file

ENV_PREFIX = "SPEC_VETTING_JOB__"
#: seconds one spectrum read may take before the pair is an ERROR row (read_timeout): a stale network mount
#: must not hang its shard
DEFAULT_READ_TIMEOUT_S = 120.0

ENGINE_NAMES = tuple(ENGINES)


class _Strict(BaseModel):
    # a misspelt key is an error, not a silently ignored setting
    model_config = ConfigDict(extra="forbid")


class EngineConfig(_Strict):
    """Which engine inspects, and how to reach it."""

    name: str | None = Field(
        None,
        description="rules | openai | local | scripted, or 'package.module:Class' for a custom engine; "
        "default: openai when endpoints or a gateway are given, else rules",
    )
    endpoints: list[str] = Field(
        default_factory=list,
        description="OpenAI-compatible base URLs including /v1, one per model replica (openai engine)",
    )
    gateway: str | None = Field(
        None,
        description="one router URL (with /v1) in front of the replicas, used instead of endpoints; "
        "max_inflight_per_endpoint then caps the gateway as a whole",
    )
    model: str | None = Field(
        None, description="served model id (openai; default: the server's first model) or local model folder (local)"
    )
    api_key_env: str = Field(DEFAULT_API_KEY_ENV, description="environment variable holding the API key, if any")
    timeout_s: float = Field(
        DEFAULT_TIMEOUT_S, gt=0,
        description="per-request deadline in seconds (openai): connect, headers and the whole body (a reply "
        "trickled byte by byte is cut at it); a request that times out is tried once more, then "
        "the endpoint counts as hung (see docs/guide/reliability.md, time bounds)",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="extra keyword options for the engine (e.g. device, dtype, batch for local)"
    )
    allow_inexact_template: bool = Field(
        False,
        description="run on endpoints whose chat template does not render training's token stream (checked with "
        "the server's /tokenize at the start; e.g. a server started without --chat-template "
        "deploy/chat_template.jinja): the published accuracy may not carry over; recorded in the manifest",
    )

    @property
    def resolved_name(self) -> str:
        if self.name:
            return self.name
        return default_engine(bool(self.endpoints or self.gateway))

    def settings(self, max_inflight_per_endpoint: int) -> EngineSettings:
        """What this section says, for the engine to turn into its options (a gateway stands for the replicas)."""
        return EngineSettings(endpoints=[self.gateway] if self.gateway else list(self.endpoints), model=self.model,
                              api_key_env=self.api_key_env, timeout_s=self.timeout_s,
                              max_inflight_per_endpoint=max_inflight_per_endpoint, options=dict(self.options))

    @field_validator("name")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is None or v in ENGINE_NAMES or ":" in v:
            return v
        raise ValueError(f"unknown engine {v!r}; use one of {', '.join(ENGINE_NAMES)} or 'module:Class'")


class SamplingConfig(_Strict):
    """Sent explicitly with every request; greedy by default, as the published validation."""

    temperature: float = Field(0.0, ge=0, description="sampling temperature; 0 = greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling mass")
    max_tokens: int | None = Field(
        None, gt=0,
        description="cap on tokens per assistant turn; default (null) as training: what is left of the response "
        "budget, min(32768, 34816 - context - 1); a number is a deviation that caps each turn")
    seed: int | None = Field(None, description="sampling seed sent to the server, if any")
    logprobs: bool = Field(False, description="ask for log-probabilities to compute p_yes from the answer token")
    top_logprobs: int = Field(0, ge=0, description="alternatives per token when logprobs is on (e.g. 5)")
    self_consistency_k: int = Field(
        1, ge=1,
        description="k > 1: run k sampled inspections per candidate and set p_yes from their agreement "
        "(needs temperature > 0)",
    )

    @model_validator(mode="after")
    def _k_needs_sampling(self) -> SamplingConfig:
        # k greedy inspections are k copies of one: refused before any shard runs, not as k ERROR rows later
        if self.self_consistency_k > 1 and self.temperature <= 0:
            raise ValueError(
                f"self_consistency_k = {self.self_consistency_k} needs sampling: set temperature above 0 "
                "(e.g. 0.7), or self_consistency_k to 1 for one greedy inspection"
            )
        return self

    def to_sampling(self) -> Sampling:
        """What every request carries; the one place a :class:`Sampling` is built from configuration."""
        return Sampling(temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens, seed=self.seed,
                        logprobs=self.logprobs, top_logprobs=self.top_logprobs)


class ClusterConfig(_Strict):
    """Where shards run. Default: a LocalCluster sized to the machine."""

    scheduler_address: str | None = Field(
        None, description="address of a running Dask scheduler (tcp://host:8786); the cluster fields below are ignored"
    )
    scheduler_file: str | None = Field(
        None, description="Dask scheduler file (JSON) of a running scheduler, as `dask scheduler --scheduler-file` "
        "and dask-jobqueue write it; instead of scheduler_address; the cluster fields below are then ignored",
    )
    workers: int | None = Field(
        None, ge=1, description="LocalCluster worker processes (default: CPU count, at most the number of shards)"
    )
    threads_per_worker: int = Field(
        2, ge=1,
        description="shards run at once per worker (they share the worker's engine and its caps; 2 lets the next "
        "shard fill the slots a finishing shard leaves idle)",
    )
    processes: bool = Field(True, description="worker processes (True) or threads in this process (False)")
    no_worker_timeout_s: float = Field(
        600.0, ge=0,
        description="a run whose cluster has had no worker at all for this long fails (exit 1) instead of waiting "
        "forever; 0 waits for workers however long it takes",
    )
    memory_limit: str | None = Field(None, description="per-worker memory limit, e.g. '4GiB' (default: Dask's)")
    dashboard: bool | None = Field(
        None,
        description="the Dask dashboard: null (default) serves it and shows its link beside the progress bar while "
        "the run lasts (a link printed for good would be dead once the run ends); true also prints the link as a "
        "line at the start (kept in logs, e.g. for a long run on a cluster that outlives it); false serves none. "
        "A LocalCluster's address comes from Dask's "
        "config key distributed.scheduler.dashboard.address (DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__ADDRESS; "
        "default ':0', a free port), the printed link from distributed.dashboard.link",
    )

    @property
    def remote(self) -> bool:
        """Shards run on a cluster started elsewhere (its workers are other processes)."""
        return bool(self.scheduler_address or self.scheduler_file)

    @model_validator(mode="after")
    def _one_scheduler(self) -> ClusterConfig:
        if self.scheduler_address and self.scheduler_file:
            raise ValueError("give scheduler_address or scheduler_file, not both")
        return self


class BudgetConfig(_Strict):
    """Limits per inspection; exceeding one gives an UNDECIDED verdict with the reason."""

    max_turns: int = Field(MAX_ASSISTANT_TURNS, ge=1, description="assistant turns per inspection (8 in training)")
    token_budget: int | None = Field(
        None, ge=1,
        description="response budget: tokens after the first prompt (generated and tool tokens) per inspection; "
        "default (null) 32768, as training")
    time_budget_s: float | None = Field(
        DEFAULT_TIME_BUDGET_S, gt=0,
        description="wall time per inspection in seconds, reruns included (null = none); counted from the moment "
        "an engine takes it; spent while waiting for the engine, the pair is ERROR engine_timeout (not inspected)",
    )
    read_timeout_s: float = Field(
        DEFAULT_READ_TIMEOUT_S, gt=0,
        description="wall time to read one spectrum file (a stale network mount must not hang its shard); past it "
        "the pair is an ERROR row (read_timeout) and the reader process doing it is killed",
    )
    read_processes: int = Field(
        DEFAULT_READ_PROCESSES, ge=0,
        description="reader processes per worker process: spectrum files are read in these children, which are "
        "killed at the read timeout and capped at read_memory_mb; 0 reads in the worker process itself (threads: a "
        "read past the timeout is abandoned, not stopped, and its memory is the worker's)",
    )
    read_memory_mb: int = Field(
        DEFAULT_READ_MEMORY_MB, ge=64,
        description="memory (MB of address space) one read may take in its reader process, plus the size of the "
        "file it reads, over what the reader maps when the read starts (about 150 MB); a read that needs more is an "
        "ERROR row (read_memory) and the reader is replaced",
    )
    max_endpoint_retries: int = Field(DEFAULT_ENDPOINT_RETRIES, ge=0,
                                      description="reruns of an inspection whose endpoint died")


class JobConfig(_Strict):
    """One `spec-vet run`."""

    candidates: list[str] = Field(
        ..., min_length=1,
        description="candidate sources: CSV/Parquet/FITS tables, folders or globs of spectra, DESI coadds, "
        "SpecVI-Bench parquet files",
    )
    tasks: list[str] = Field(
        default_factory=list,
        description="task keys of this run. A candidate row with its own task runs it only if it is listed here "
        "(all row tasks run when this is empty); a row without a task runs every task listed here",
    )
    tasks_file: str | None = Field(None, description="YAML file of extra or overriding tasks (see `spec-vet tasks`)")
    out: str = Field(..., description="catalog root; runs accumulate under it")
    engine: EngineConfig = Field(default_factory=EngineConfig, description="the engine")
    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="sampling of every request")
    budgets: BudgetConfig = Field(default_factory=BudgetConfig, description="limits per inspection")
    max_inflight_per_endpoint: int = Field(
        8, ge=1,
        description="in-flight inspections per endpoint over the whole cluster (split evenly over the worker "
        "processes, rounded down, so the cap always holds: 8 over 3 workers allows 2 each; never more worker "
        "processes than this cap for an engine that has one)",
    )
    concurrency: int = Field(
        8, ge=1, description="in-flight inspections per shard for in-process engines (rules, local, scripted)"
    )
    shard_size: int | None = Field(
        None, ge=1,
        description="candidate-task pairs per shard (one Dask task, the unit of resume); default: about 1/32 of "
        "the pairs, 4 to 100, and for openai at least the in-flight cap of all endpoints",
    )
    run_id: str | None = Field(
        None, description="id of the run (default: UTC time + short hash); an unfinished run with this id is resumed"
    )
    run_date: dt.date | None = Field(None, description="partition date of the run (default: today, local time)")
    title: str = Field("Spectrum", description="plot title of the pictures (the trained setup uses 'Spectrum')")
    specvi_rerender: bool = Field(
        False,
        description="SpecVI-Bench rows: draw the first picture with this project's renderer instead of showing the "
        "row's own full view (`images`, the picture the model saw in training); verdicts record which in "
        "initial_image_source",
    )
    incremental: bool = Field(
        False,
        description="skip candidate-task pairs already vetted (verdict not ERROR) in earlier runs under out "
        "with the same engine, model and prompt version",
    )
    merge_small_nights: bool = Field(
        True,
        description="when a run finishes, move its compacted files under 16 MB into one file per table, task and "
        "month (ROOT/<table>/<YYYY-MM>/part-month-*), so a year of small nights stays a few files; false keeps "
        "every run's own files",
    )
    store_pictures: bool = Field(
        False,
        description="also store the PNG bytes of every picture (once per distinct picture, in ROOT/pictures/); by "
        "default pictures are kept by reference (sha256, window, renderer version, title) and re-rendered on demand",
    )
    evidence: list[EvidenceSource] = Field(
        default_factory=list,
        description="external HATS catalogs to cross-match every candidate with before inspection (through lsdb, on "
        "the run's Dask cluster): entries NAME=CATALOG or {name, catalog, radius_arcsec (1.0), columns, epoch}; "
        "gaia fills the gaia_* columns (M_G included) and the rules engine's evidence terms",
    )
    evidence_prompt: bool = Field(
        False,
        description="append one evidence sentence (Gaia parallax, M_G, colour, proper motion) to each task text, for "
        "a checkpoint trained with it; off by default, as the published weights never saw catalog data; recorded in "
        "the manifest and in prompt_version (+evidence1)",
    )
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="where shards run")
    max_error_rate: float | None = Field(
        None, ge=0, le=1,
        description="fail the run (exit 1, FAILED in run.log) when the fraction of ERROR verdicts is above this "
        "(0-1), e.g. 0.5 catches an unmounted data folder; null = never",
    )

    def ignored_settings(self) -> list[str]:
        """Dotted fields this job sets that its engine does not use (the engine class says which: its
        ``ignored_settings``; ``sampling.logprobs`` is unused by an engine whose p_yes does not come from logprobs).

        E.g. ``--engine rules`` with a GPU job file: ``engine.endpoints`` and ``sampling.logprobs``.
        """
        cls = EngineChoice.named(self.engine.resolved_name).cls
        ignored_fn = getattr(cls, "ignored_settings", None)
        ignored = ignored_fn(self.engine.settings(self.max_inflight_per_endpoint)) if ignored_fn else []
        out: list[str] = []
        for setting in ignored:
            if setting == "endpoints":
                out += [f"engine.{f}" for f in ("endpoints", "gateway") if getattr(self.engine, f)]
            else:
                out.append(f"engine.{setting}")
        if getattr(cls, "p_yes_source", None) != "logprobs":
            if self.sampling.logprobs:
                out.append("sampling.logprobs")
            if self.sampling.top_logprobs:
                out.append("sampling.top_logprobs")
        return out

    @field_validator("run_id")
    @classmethod
    def _run_id_ok(cls, v: str | None) -> str | None:
        if v is not None and (not v or any(c in v for c in "/\\ =") or v.startswith((".", "_"))):
            raise ValueError("run_id must be a word without '/', '\\', '=', spaces, not starting with '.' or '_'")
        return v

    @field_validator("evidence")
    @classmethod
    def _evidence_unique(cls, v: list[EvidenceSource]) -> list[EvidenceSource]:
        check_unique(v)
        return v

    @field_validator("tasks")
    @classmethod
    def _tasks_unique(cls, v: list[str]) -> list[str]:
        seen: list[str] = []
        for t in v:
            if t not in seen:
                seen.append(t)
        return seen


def auto_shard_size(job: JobConfig, n_pairs: int, engine: EngineChoice | None = None) -> int:
    """The shard size when the job leaves it open. Depends only on the job and the plan (never on the number of
    workers), so a resumed run cuts the same shards. Runs get about 32 shards (4 to 100 pairs each) to spread over
    the workers; an HTTP run's shards hold at least the cluster's whole in-flight cap, so one shard can fill every
    slot of a worker. Not more: a worker runs two shards at once on one engine, so the next shard fills the slots a
    finishing one leaves, and small shards keep the workers' last shards short (3 shards of 64 on 2 workers
    reached 67 % of the rate limit, 24 shards of 8 reached 89 %)."""
    if job.shard_size:
        return job.shard_size
    size = min(100, max(4, -(-n_pairs // 32)))
    # an engine with an in-flight cap (HTTP) gets shards that can fill every slot of a worker
    engine = engine or EngineChoice.named(job.engine.resolved_name)
    slots = engine.in_flight_slots(engine.options(job.engine.settings(job.max_inflight_per_endpoint)))
    return max(size, slots) if slots else size


def _format_errors(exc: ValidationError, where: str) -> str:
    lines = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"{where}: field '{loc}': {e['msg']}")
    return "\n".join(lines) + "\n(see `spec-vet run --example` for every field with its meaning)"


def _set_path(data: dict, path: list[str], value: Any) -> None:
    node = data
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


def apply_env_overrides(data: dict, environ: dict[str, str] | None = None) -> dict:
    """``SPEC_VETTING_JOB__A__B=value`` sets field a.b to the YAML value (so lists and numbers work)."""
    environ = os.environ if environ is None else environ
    data = dict(data)
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX):].split("__") if p]
        if not path:
            continue
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"environment variable {name}: not a valid YAML value ({exc})") from exc
        _set_path(data, path, value)
    return data


def _resolve_paths(data: dict, base: Path) -> dict:
    """Make the job file's relative paths relative to its folder (globs and URLs left alone when absolute)."""

    def fix(p: Any) -> Any:
        if not isinstance(p, str) or "://" in p or os.path.isabs(os.path.expanduser(p)):
            return os.path.expanduser(p) if isinstance(p, str) else p
        return str(base / p)

    data = dict(data)
    if isinstance(data.get("candidates"), list):
        data["candidates"] = [fix(p) for p in data["candidates"]]
    elif isinstance(data.get("candidates"), str):
        data["candidates"] = [fix(data["candidates"])]
    for key in ("out", "tasks_file"):
        if key in data:
            data[key] = fix(data[key])
    if isinstance(data.get("evidence"), list):
        data["evidence"] = [_fix_catalog(e, fix) for e in data["evidence"]]
    if isinstance(data.get("cluster"), dict) and data["cluster"].get("scheduler_file"):
        data["cluster"] = {**data["cluster"], "scheduler_file": fix(data["cluster"]["scheduler_file"])}
    return data


def _fix_catalog(entry: Any, fix) -> Any:
    """An evidence entry (NAME=CATALOG or a mapping) with its catalog path resolved like the other paths."""
    if isinstance(entry, str) and "=" in entry:
        name, _, catalog = entry.partition("=")
        return f"{name}={fix(catalog.strip())}"
    if isinstance(entry, dict) and isinstance(entry.get("catalog"), str):
        return {**entry, "catalog": fix(entry["catalog"])}
    return entry


def job_from_dict(data: dict, where: str = "job") -> JobConfig:
    """Validate a plain dict (from YAML or options); :class:`ConfigError` naming ``where`` and each bad field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a job file is a YAML mapping of fields (see `spec-vet run --example`)")
    try:
        return JobConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, where)) from exc


def load_job_dict(path: str | os.PathLike) -> dict:
    """The raw mapping of a job file, paths resolved relative to its folder (not validated yet)."""
    path = Path(path)
    data = read_yaml_file(path, "job file")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a job file is a YAML mapping of fields (see `spec-vet run --example`)")
    return _resolve_paths(data, path.resolve().parent)


def with_overrides(data: dict, overrides: dict | None = None, environ: dict[str, str] | None = None) -> dict:
    """``data`` with the environment overrides, then ``overrides`` (dotted field -> value, from options) set."""
    data = apply_env_overrides(data, environ)
    for dotted, value in (overrides or {}).items():
        _set_path(data, dotted.split("."), value)
    return data


def load_job(
    path: str | os.PathLike, overrides: dict | None = None, environ: dict[str, str] | None = None
) -> JobConfig:
    """A job file, then environment overrides, then ``overrides`` (command-line options), validated."""
    return job_from_dict(with_overrides(load_job_dict(path), overrides, environ), str(path))


def example_job_text() -> str:
    """The commented example job file printed by ``spec-vet run --example``."""
    from importlib import resources

    return resources.files(__package__).joinpath("example_job.yaml").read_text(encoding="utf-8")
