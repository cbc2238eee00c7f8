"""`spec-vet run`: vet a candidate list with the batch pipeline (a job file, options, or both).

Every job-file field is also an option (one table below defines both the option and the field it sets), so a
one-off run needs no file; options override the job file's fields; with no job file, ``--candidates`` and
``--out`` are enough. Exit codes: 0 the run finished (ERROR rows included; also an empty candidate folder:
"nothing to vet"); 1 it could not finish (safe to rerun: it resumes), or it finished with more ERROR rows than
``--max-error-rate``; 2 usage or configuration error; 130 / 143 interrupted by SIGINT (Ctrl-C) / SIGTERM
(finished shards kept, INTERRUPTED in run.log; rerun to resume).
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import click

from ..engines.http import DEFAULT_TIMEOUT_S
from ..errors import ConfigError, SpecVettingError
from ..inspect.loop import DEFAULT_ENDPOINT_RETRIES, DEFAULT_TIME_BUDGET_S
from ..io.read_pool import DEFAULT_READ_MEMORY_MB, DEFAULT_READ_PROCESSES
from ..pipeline.config import DEFAULT_READ_TIMEOUT_S
from ..protocol import MAX_ASSISTANT_TURNS, RESPONSE_TOKENS
from .complete import complete_task
from .output_path import output_folder


def _job_option(field: str, *flags: str, **kwargs):
    """A click option that sets the job field ``field`` (dotted); its parameter name encodes the field."""
    return field, click.option(*flags, field.replace(".", "__"), default=kwargs.pop("default", None), **kwargs)


#: (job field, option) for every field of the job file (a test walks the schema to keep this complete)
JOB_OPTIONS = [
    _job_option("candidates", "--candidates", multiple=True, type=click.Path(), metavar="PATH",
                help="Candidate source: table (CSV/Parquet/FITS), folder, glob, DESI coadd, SpecVI parquet. "
                "Repeatable."),
    _job_option("tasks", "--task", multiple=True, shell_complete=complete_task,
                help="Task key (cv, carbon, ss, gm, wd, ...). Repeatable. See `spec-vet tasks list`."),
    _job_option("tasks_file", "--tasks-file", type=click.Path(dir_okay=False),
                help="YAML file of extra or overriding tasks."),
    _job_option("out", "--out", type=click.Path(file_okay=False), help="Catalog root (runs accumulate under it)."),
    _job_option("engine.name", "--engine",
                help="rules | openai | local | scripted | package.module:Class "
                "(default: openai with --endpoint/--gateway, else rules)."),
    _job_option("engine.endpoints", "--endpoint", multiple=True,
                help="OpenAI-compatible base URL with /v1, one per replica. Repeatable."),
    _job_option("engine.gateway", "--gateway", help="One router URL in front of the replicas, instead of --endpoint."),
    _job_option("engine.model", "--model", help="Served model id, or the model folder for --engine local."),
    _job_option("engine.api_key_env", "--api-key-env", help="Environment variable holding the API key."),
    _job_option("engine.timeout_s", "--timeout", type=float,
                help=f"Per-request deadline, seconds ({DEFAULT_TIMEOUT_S:g}): connect, headers and the whole body."),
    _job_option("engine.allow_inexact_template", "--allow-inexact-template/--exact-template-only",
                help="Run on endpoints whose chat template differs from training's token stream (refused by "
                "default; see `spec-vet endpoints check`)."),
    _job_option("engine.options", "--engine-option", multiple=True, metavar="KEY=VALUE",
                help="Extra engine option (YAML value), e.g. --engine-option device=cuda. Repeatable."),
    _job_option("sampling.temperature", "--temperature", type=float, help="Sampling temperature (0 = greedy)."),
    _job_option("sampling.top_p", "--top-p", type=float, help="Nucleus sampling mass (1.0)."),
    _job_option("sampling.max_tokens", "--max-tokens", type=int,
                help="Cap on tokens per assistant turn "
                "(default as training: the rest of the 32768-token response budget)."),
    _job_option("sampling.seed", "--seed", type=int, help="Sampling seed sent to the server."),
    _job_option("sampling.logprobs", "--logprobs/--no-logprobs",
                help="p_yes from the answer token's log-probabilities."),
    _job_option("sampling.top_logprobs", "--top-logprobs", type=int, help="Alternatives per token with --logprobs."),
    _job_option("sampling.self_consistency_k", "--self-consistency-k", type=int,
                help="k sampled inspections per pair, p_yes from agreement (needs --temperature > 0)."),
    _job_option("budgets.max_turns", "--max-turns", type=int,
                help=f"Assistant turns per inspection ({MAX_ASSISTANT_TURNS})."),
    _job_option("budgets.token_budget", "--token-budget", type=int,
                help=f"Response tokens per inspection, tool tokens included ({RESPONSE_TOKENS})."),
    _job_option("budgets.time_budget_s", "--time-budget", type=float,
                help=f"Seconds per inspection ({DEFAULT_TIME_BUDGET_S:g})."),
    _job_option("budgets.read_timeout_s", "--read-timeout", type=float,
                help=f"Seconds to read one spectrum file ({DEFAULT_READ_TIMEOUT_S:g}); then an ERROR row."),
    _job_option("budgets.read_processes", "--read-processes", type=int,
                help=f"Reader processes per worker ({DEFAULT_READ_PROCESSES}; 0 reads in the worker itself, where a "
                "read past the timeout cannot be stopped)."),
    _job_option("budgets.read_memory_mb", "--read-memory", type=int, metavar="MB",
                help=f"Memory one read may take in its reader ({DEFAULT_READ_MEMORY_MB} MB, plus the file's "
                "size); then an ERROR row."),
    _job_option("budgets.max_endpoint_retries", "--max-endpoint-retries", type=int,
                help=f"Reruns of an inspection whose endpoint died ({DEFAULT_ENDPOINT_RETRIES})."),
    _job_option("max_inflight_per_endpoint", "--max-inflight-per-endpoint", type=int,
                help="In-flight inspections per endpoint, whole cluster (8)."),
    _job_option("concurrency", "--concurrency", type=int, help="In-flight inspections per shard (in-process engines)."),
    _job_option("shard_size", "--shard-size", type=int, help="Candidate-task pairs per shard (the unit of resume)."),
    _job_option("run_id", "--run", "--run-id",
                help="Run id (default: time + hash); an unfinished run with this id is resumed (--run-id is the same "
                "option)."),
    _job_option("run_date", "--run-date", help="Partition date YYYY-MM-DD (default: today)."),
    _job_option("title", "--title", help="Plot title of the pictures ('Spectrum', as in training)."),
    _job_option("specvi_rerender", "--specvi-rerender/--no-specvi-rerender",
                help="SpecVI-Bench rows: draw the first picture instead of showing the row's own `images`."),
    _job_option("incremental", "--incremental/--no-incremental",
                help="Skip pairs vetted in earlier runs under --out (same engine, model and prompt version)."),
    _job_option("merge_small_nights", "--merge-small-nights/--no-merge-small-nights",
                help="When the run finishes, merge its small files (under 16 MB) into one file per table, task "
                     "and month (default on; --no-merge-small-nights keeps each run's own files)."),
    _job_option("store_pictures", "--store-pictures/--no-store-pictures",
                help="Also store the PNG bytes (once per distinct picture); default: pictures by reference."),
    _job_option("evidence", "--evidence", multiple=True, metavar="NAME=CATALOG",
                help="Cross-match every candidate with a HATS catalog before inspection (e.g. gaia=/data/hats/"
                "gaia_dr3, 1 arcsec, proper motions applied): the gaia_* columns; ztf=CATALOG: a light-curve "
                "catalog (ZTF DR columns), summarised per band into evidence_extra. Repeatable."),
    _job_option("evidence_prompt", "--evidence-prompt/--no-evidence-prompt",
                help="Append one evidence sentence (Gaia parallax, M_G, colour) to each task text, for a checkpoint "
                "trained with it (off: the trained prompt). Recorded in the manifest."),
    _job_option("cluster.scheduler_address", "--scheduler", help="Address of a running Dask scheduler (tcp://host:8786)."),
    _job_option("cluster.scheduler_file", "--scheduler-file", type=click.Path(dir_okay=False),
                help="Dask scheduler file of a running scheduler (dask scheduler --scheduler-file, dask-jobqueue)."),
    _job_option("cluster.workers", "--workers", type=int, help="LocalCluster worker processes (default: CPU count)."),
    _job_option("cluster.threads_per_worker", "--threads-per-worker", type=int,
                help="Shards at once per worker (2)."),
    _job_option("cluster.processes", "--processes/--threads",
                help="Worker processes (default) or threads in this process."),
    _job_option("cluster.no_worker_timeout_s", "--no-worker-timeout", type=float,
                help="Fail when the cluster has had no worker for this many seconds (600; 0: wait forever)."),
    _job_option("cluster.memory_limit", "--memory-limit", help="Per-worker memory limit, e.g. 4GiB."),
    _job_option("cluster.dashboard", "--dashboard/--no-dashboard",
                help="Print the Dask dashboard link as a line that stays (default: served, its link shown beside "
                "the progress bar while the run lasts); --no-dashboard serves none."),
    _job_option("max_error_rate", "--max-error-rate", type=float,
                help="Exit 1 (FAILED) when more than this fraction (0-1) of the verdicts are ERROR."),
]


def _engine_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    out = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--engine-option {pair!r}: expected KEY=VALUE, e.g. --engine-option device=cuda")
        try:
            out[key.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--engine-option {pair!r}: the value is not valid YAML ({exc})") from exc
    return out


def _overrides(opts: dict) -> dict:
    """Command-line options as dotted job fields; only those the user gave."""
    out = {}
    for name, value in opts.items():
        if value is None or value == ():
            continue
        field = name.replace("__", ".")
        if field == "engine.options":
            # one key at a time, so the job file's other engine options stay
            out.update({f"engine.options.{k}": v for k, v in _engine_options(value).items()})
        else:
            out[field] = list(value) if isinstance(value, tuple) else value
    return out


def build_job(job_file: str | None, opts: dict):
    from ..pipeline.config import job_from_dict, load_job, with_overrides

    overrides = _overrides(opts)
    if job_file:
        return load_job(job_file, overrides)
    data = with_overrides({}, overrides)
    missing = [flag for key, flag in (("candidates", "--candidates PATH"), ("out", "--out ROOT")) if key not in data]
    if missing:
        raise ConfigError(
            f"no job file given and missing {' and '.join(missing)}; e.g. "
            "`spec-vet run --candidates list.csv --task cv --out catalog/` (or `spec-vet run --example`)"
        )
    return job_from_dict(data, "command line")


def check_ignored_settings(job, opts: dict) -> list[str]:
    """Settings the job's engine does not use: :class:`ConfigError` for one given as an option (the command line
    refuses it), a warning line for one from the job file or the environment (a job warns)."""
    ignored = job.ignored_settings()
    if not ignored:
        return []
    given = set(_overrides(opts))
    flags = {p.name.replace("__", "."): p.opts[0] for p in run.params if isinstance(p, click.Option) and p.name}
    engine = job.engine.resolved_name
    on_line = [f for f in ignored if f in given]
    if on_line:
        raise ConfigError(f"{', '.join(flags.get(f, f) for f in on_line)}: not used by engine {engine}; drop "
                          f"{'it' if len(on_line) == 1 else 'them'} or choose an engine that uses "
                          f"{'it' if len(on_line) == 1 else 'them'}")
    return [f"warning: engine {engine} does not use {', '.join(ignored)} (set in the job file or the environment): "
            f"{'it is' if len(ignored) == 1 else 'they are'} ignored in this run"]


def format_summary(outcome) -> str:
    from ..analysis.evaluate import VERDICT_COLUMNS

    s = outcome.summary
    lines = [f"run {outcome.run_id} ({outcome.status}{', resumed' if outcome.resumed else ''})"]
    for task, counts in s.get("verdicts_by_task", {}).items():
        parts = ", ".join(f"{v} {counts[v]}" for v in VERDICT_COLUMNS if counts.get(v))
        lines.append(f"  {task:<10} {sum(counts.values()):>6}  {parts}")
    errors = s.get("errors_by_kind") or {}
    lines.append("  errors: " + (", ".join(f"{k} {n}" for k, n in errors.items()) if errors else "none"))
    tok = s.get("tokens", {})
    if tok.get("prompt"):
        rate = tok.get("cache_hit_rate")
        lines.append(
            f"  tokens: prompt {tok['prompt']}, completion {tok['completion']}, cached {tok['cached']}"
            + (f" (cache hits {rate:.0%})" if rate is not None else "")
        )
    if s.get("throughput_per_s") is not None:
        lines.append(
            f"  {s.get('inspections_this_attempt', 0)} inspections in {s.get('wall_s')} s "
            f"({s['throughput_per_s']:.2f}/s this attempt)"
        )
    lines.append(f"catalog: {outcome.root}  (manifest {outcome.manifest_path})")
    return "\n".join(lines)


class RunInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: the run stops like a Ctrl-C (finished shards kept, a line in run.log)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: exit codes of an interrupted run: 128 + the signal, as shells and systemd report them
EXIT_INTERRUPTED = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _on_signal(signum, frame):
    # the first signal interrupts; more of them (a second Ctrl-C, systemd's repeated SIGTERM) must not break the
    # cleanup that records the interruption
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    raise RunInterrupted(signum)


def _install_signal_handlers() -> None:
    import threading

    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, _on_signal)


def _with_job_options(command):
    for _, option in reversed(JOB_OPTIONS):
        command = option(command)
    return command


@click.command("run", context_settings={"show_default": False})
@click.argument("job_file", required=False, type=click.Path(dir_okay=False))
@click.option("--example", is_flag=True, help="Print a commented example job file and exit.")
@_with_job_options
@click.option("--fresh", is_flag=True, help="Start a new run instead of resuming an unfinished one, or of doing "
              "nothing when the same command already finished.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: only on a terminal).")
def run(job_file, example, fresh, progress, **opts):
    """Vet candidates in batch: shards on Dask, verdicts and traces to a Parquet catalog under --out.

    \b
    spec-vet run job.yaml
    spec-vet run --candidates list.csv --task cv --task wd --engine rules --out catalog/
    spec-vet run --candidates list.csv --task cv --endpoint http://gpu01:30000/v1 --out catalog/

    Rerunning the same command after a crash resumes the unfinished run (--fresh starts a new one).
    Exit codes: 0 finished (ERROR rows included) or nothing to vet, 1 could not finish (rerun to resume) or ERROR
    rate above --max-error-rate, 2 usage/configuration, 130/143 interrupted by SIGINT/SIGTERM (rerun to resume).

    
    Candidate tables (--candidates CSV, Parquet or FITS table; column names in any case, others ignored):
      path          spectrum file (also: file, filename); relative paths resolve against the table's folder
      candidate_id  stable id (default: the file name, plus -TARGETID for DESI)
      target        DESI TARGETID or row inside a multi-target file (also: targetid)
      task          run only this task for the row (default: every --task)
      label         YES/NO (also y/n, true/false, t/f, 1/0, any case; empty = unknown), for eval
      ra, dec       degrees, when the file has none
      redrock       DESI redshift file to join (default: redrock-X.fits next to coadd-X.fits)
      mjd           when the spectrum was taken (also: epoch_mjd), the epoch --evidence moves catalog
                    sources to (default: the MJD in a LAMOST or SDSS file name)
      gaia_*        Gaia values already matched (gaia_parallax ...): used as given by --evidence gaia=...
    Folders, globs of FITS files, DESI coadds and SpecVI-Bench parquet files are candidate sources too.
    """
    if example:
        from ..pipeline.config import example_job_text

        click.echo(example_job_text(), nl=False)
        return
    from ..errors import RunFailedError, RunLockedError, RunNotStartedError
    from ..pipeline.runner import run_job
    from .plotting import require_plotting_environment

    require_plotting_environment()

    try:
        job = build_job(job_file, opts)
        output_folder(job.out, "--out")  # checked, not created: a refused run writes nothing
        _install_signal_handlers()
        for line in check_ignored_settings(job, opts):
            click.echo(line, err=True)
        outcome = run_job(job, fresh=fresh, progress=progress, echo=lambda s: click.echo(s, err=True))
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except RunNotStartedError as exc:  # no run id yet and nothing written: there is nothing to resume
        click.echo(f"error: {str(exc).rstrip('. ')}; nothing was written: fix that, then run the same command "
                   "again.", err=True)
        sys.exit(1)
    except (RunLockedError, RunFailedError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except SpecVettingError as exc:
        click.echo(f"error: the run could not finish: {exc}. Rerun the same command to resume.", err=True)
        sys.exit(1)
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        click.echo(f"\ninterrupted by {signal.Signals(signum).name}: finished shards are kept; rerun the same "
                   "command to resume.", err=True)
        sys.exit(EXIT_INTERRUPTED.get(signum, 130))
    except OSError as exc:  # disk full, permissions changed mid-run ...: what is done is kept
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        click.echo(
            f"error: the run could not finish: {exc.strerror or exc}{where}. Fix that, then rerun the same command "
            "to resume.",
            err=True,
        )
        sys.exit(1)
    if outcome.status == "nothing_to_do":  # a finished run with the same inputs was named by run_job; exit 0
        if outcome.summary.get("reason"):  # no candidate at all: an empty incoming folder is a normal night
            click.echo(f"nothing to vet: {outcome.summary['reason']}")
        return
    if outcome.status == "catalog_update_failed":
        click.echo(f"error: run {outcome.run_id} FAILED: {outcome.failures[0]}", err=True)
        sys.exit(1)
    click.echo(format_summary(outcome))
    if outcome.status == "error_rate_exceeded":
        click.echo(f"error: the run finished but {outcome.failures[0]}. Check the data folder and the engine "
                   "(spec-vet catalog summary); the rows are kept.", err=True)
        sys.exit(1)
    if outcome.status != "finished":
        click.echo(
            f"error: {len(outcome.failures)} shard(s) failed (first: {outcome.failures[0]}); what is done is kept. "
            "Rerun the same command to finish the run.",
            err=True,
        )
        sys.exit(1)
