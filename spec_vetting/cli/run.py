"""`spec-vet run`: vet a candidate list with the batch pipeline (a job file, options, or both).

Options override the job file's fields; with no job file, ``--candidates`` and ``--out`` are enough. Exit codes:
0 the run finished (ERROR rows included); 1 it could not finish (safe to rerun: it resumes); 2 usage or
configuration error.
"""

from __future__ import annotations

import sys

import click

from ..errors import ConfigError, SpecVettingError


def _overrides(opts: dict) -> dict:
    """Command-line options as dotted job fields; only those the user gave."""
    mapping = {
        "candidates": "candidates",
        "task": "tasks",
        "tasks_file": "tasks_file",
        "out": "out",
        "engine": "engine.name",
        "endpoint": "engine.endpoints",
        "gateway": "engine.gateway",
        "model": "engine.model",
        "api_key_env": "engine.api_key_env",
        "timeout": "engine.timeout_s",
        "temperature": "sampling.temperature",
        "top_p": "sampling.top_p",
        "max_tokens": "sampling.max_tokens",
        "seed": "sampling.seed",
        "logprobs": "sampling.logprobs",
        "top_logprobs": "sampling.top_logprobs",
        "self_consistency_k": "sampling.self_consistency_k",
        "max_turns": "budgets.max_turns",
        "token_budget": "budgets.token_budget",
        "time_budget": "budgets.time_budget_s",
        "max_inflight_per_endpoint": "max_inflight_per_endpoint",
        "concurrency": "concurrency",
        "shard_size": "shard_size",
        "run_id": "run_id",
        "run_date": "run_date",
        "title": "title",
        "incremental": "incremental",
        "workers": "cluster.workers",
        "threads_per_worker": "cluster.threads_per_worker",
        "processes": "cluster.processes",
        "scheduler": "cluster.scheduler_address",
        "dashboard": "cluster.dashboard",
    }
    out = {}
    for opt, dotted in mapping.items():
        value = opts.get(opt)
        if value is None or value == ():
            continue
        out[dotted] = list(value) if isinstance(value, tuple) else value
    return out


def build_job(job_file: str | None, opts: dict):
    from ..pipeline.config import apply_env_overrides, job_from_dict, load_job, _set_path

    overrides = _overrides(opts)
    if job_file:
        return load_job(job_file, overrides)
    data: dict = apply_env_overrides({})
    for dotted, value in overrides.items():
        _set_path(data, dotted.split("."), value)
    missing = [flag for key, flag in (("candidates", "--candidates PATH"), ("out", "--out ROOT")) if key not in data]
    if missing:
        raise ConfigError(
            f"no job file given and missing {' and '.join(missing)}; e.g. "
            "`spec-vet run --candidates list.csv --task cv --out catalog/` (or `spec-vet run --example`)"
        )
    return job_from_dict(data, "command line")


def format_summary(outcome) -> str:
    s = outcome.summary
    lines = [f"run {outcome.run_id} ({outcome.status}{', resumed' if outcome.resumed else ''})"]
    for task, counts in s.get("verdicts_by_task", {}).items():
        parts = ", ".join(f"{v} {counts[v]}" for v in ("YES", "NO", "UNDECIDED", "ERROR") if counts.get(v))
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


@click.command("run", context_settings={"show_default": False})
@click.argument("job_file", required=False, type=click.Path(dir_okay=False))
@click.option("--example", is_flag=True, help="Print a commented example job file and exit.")
@click.option("--candidates", multiple=True, help="Candidate source (table, folder, glob, DESI coadd, SpecVI parquet). Repeatable.")
@click.option("--task", multiple=True, help="Task key (cv, carbon, ss, gm, wd, ...). Repeatable. See `spec-vet tasks list`.")
@click.option("--tasks-file", help="YAML file of extra or overriding tasks.")
@click.option("--out", help="Catalog root (runs accumulate under it).")
@click.option("--engine", help="rules | openai | local (default: openai with --endpoint, else rules).")
@click.option("--endpoint", multiple=True, help="OpenAI-compatible base URL with /v1. Repeatable.")
@click.option("--gateway", help="One router URL in front of the replicas, instead of --endpoint.")
@click.option("--model", help="Served model id, or the model folder for --engine local.")
@click.option("--api-key-env", help="Environment variable holding the API key.")
@click.option("--timeout", type=float, help="Per-request timeout, seconds.")
@click.option("--temperature", type=float)
@click.option("--top-p", type=float)
@click.option("--max-tokens", type=int, help="Max tokens per assistant turn.")
@click.option("--seed", type=int)
@click.option("--logprobs/--no-logprobs", default=None, help="p_yes from the answer token's log-probabilities.")
@click.option("--top-logprobs", type=int)
@click.option("--self-consistency-k", type=int, help="k sampled inspections per pair; p_yes from agreement.")
@click.option("--max-turns", type=int, help="Assistant turns per inspection (8).")
@click.option("--token-budget", type=int, help="Tokens per inspection.")
@click.option("--time-budget", type=float, help="Seconds per inspection.")
@click.option("--max-inflight-per-endpoint", type=int, help="In-flight inspections per endpoint, whole cluster.")
@click.option("--concurrency", type=int, help="In-flight inspections per shard (in-process engines).")
@click.option("--shard-size", type=int, help="Candidate-task pairs per shard.")
@click.option("--run-id", help="Run id (default: time + hash); an unfinished run with this id is resumed.")
@click.option("--run-date", help="Partition date YYYY-MM-DD (default: today).")
@click.option("--title", help="Plot title of the pictures ('Spectrum').")
@click.option("--incremental/--no-incremental", default=None, help="Skip pairs vetted in earlier runs (same model+prompt).")
@click.option("--fresh", is_flag=True, help="Start a new run instead of resuming an unfinished one.")
@click.option("--workers", type=int, help="LocalCluster workers (default: CPU count).")
@click.option("--threads-per-worker", type=int)
@click.option("--processes/--threads", default=None, help="Worker processes (default) or threads in this process.")
@click.option("--scheduler", help="Address of a running Dask scheduler (tcp://host:8786).")
@click.option("--dashboard/--no-dashboard", default=None, help="Serve and print the Dask dashboard.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: only on a terminal).")
def run(job_file, example, fresh, progress, **opts):
    """Vet candidates in batch: shards on Dask, verdicts and traces to a Parquet catalog under --out.

    \b
    spec-vet run job.yaml
    spec-vet run --candidates list.csv --task cv --task wd --engine rules --out catalog/
    spec-vet run --candidates list.csv --task cv --endpoint http://gpu01:30000/v1 --out catalog/

    Rerunning the same command after a crash resumes the unfinished run (--fresh starts a new one).
    Exit codes: 0 finished (ERROR rows included), 1 could not finish (rerun to resume), 2 usage/configuration.
    """
    if example:
        from ..pipeline.config import example_job_text

        click.echo(example_job_text(), nl=False)
        return
    from ..pipeline.lock import RunLockedError
    from ..pipeline.runner import RunFailedError, run_job

    try:
        job = build_job(job_file, opts)
        outcome = run_job(job, fresh=fresh, progress=progress, echo=lambda s: click.echo(s, err=True))
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (RunLockedError, RunFailedError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except SpecVettingError as exc:
        click.echo(f"error: the run could not finish: {exc}. Rerun the same command to resume.", err=True)
        sys.exit(1)
    click.echo(format_summary(outcome))
    if outcome.status != "finished":
        click.echo(
            f"error: {len(outcome.failures)} shard(s) failed (first: {outcome.failures[0]}); what is done is kept. "
            "Rerun the same command to finish the run.",
            err=True,
        )
        sys.exit(1)
