"""`spec-vet plan`: GPU-hours and wall time for a candidate count."""

from __future__ import annotations

import json

import click

from ..analysis.capacity import (
    PAPER_GPU_SECONDS_PER_SPECTRUM,
    Throughput,
    Workload,
    plan_capacity,
    workload_from_catalog,
)
from .run_option import checked_run, run_option


@click.command()
@click.option("--candidates", "-n", type=click.IntRange(min=0), required=True,
              help="Number of inspections (candidates x tasks).")
@click.option("--gpus", "-g", type=click.IntRange(min=1), default=8, show_default=True,
              help="GPUs, one SGLang replica each.")
@click.option("--catalog", type=click.Path(exists=True, file_okay=False),
              help="Measure turns and tokens per inspection from this catalog instead of the defaults.")
@run_option("with --catalog: measure this run (default: all runs)")
@click.option("--turns", type=float, help="Assistant turns per inspection (default 4, or measured).")
@click.option("--gen-tokens", type=float, help="Generated tokens per turn (default 250, or measured).")
@click.option("--prefill-rate", type=float, default=Throughput.prefill_tokens_per_s, show_default=True,
              help="Prefill tokens/s per GPU.")
@click.option("--decode-rate", type=float, default=Throughput.decode_tokens_per_s, show_default=True,
              help="Decode tokens/s per GPU (aggregate over the batch).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan(candidates, gpus, catalog, run_id, turns, gen_tokens, prefill_rate, decode_rate, as_json):
    """Estimate prefill and decode tokens, GPU-hours and wall time for N inspections on G GPUs.

    \b
    The model: turn 1 reads the system text, the task prompt and the full-view picture; each later turn adds
    the previous answer, the tool text and one zoom picture (prefilled once thanks to the per-replica prefix
    cache); every turn generates --gen-tokens tokens. GPU time = prefill/prefill-rate + decode/decode-rate.
    Rates default to conservative 7B-bf16 figures for one H100/H200; measure yours with
    benchmarks/gpu/bench_gpu.py.

    \b
    Example:
      spec-vet plan --candidates 200000 --gpus 8
      spec-vet plan --candidates 200000 --gpus 8 --catalog catalog/
    """
    if catalog:
        run_id = checked_run(catalog, run_id)
    try:
        workload = workload_from_catalog(catalog, run_id) if catalog else Workload()
    except (ValueError, FileNotFoundError) as exc:
        raise click.UsageError(str(exc)) from exc
    if turns is not None:
        workload.turns = turns
    if gen_tokens is not None:
        workload.gen_tokens_per_turn = gen_tokens
    result = plan_capacity(candidates, gpus, workload, Throughput(prefill_rate, decode_rate))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    per, tot = result.per_inspection, result.totals
    if workload.note:
        click.echo(f"note: {workload.note}")
    click.echo(f"workload from {workload.source}: {workload.turns:.1f} turns/inspection, "
               f"{workload.gen_tokens_per_turn:.0f} generated tokens/turn, pictures {workload.full_view_tokens} "
               f"(full view) and {workload.zoom_tokens} (zoom) image tokens")
    click.echo(f"per inspection: {per['prompt_tokens']:.0f} prompt tokens billed, {per['prefill_tokens']:.0f} "
               f"prefilled with the prefix cache, {per['decode_tokens']:.0f} decoded, "
               f"{per['gpu_seconds']:.2f} GPU-seconds")
    click.echo(f"{candidates} inspections: {tot['prefill_tokens'] / 1e6:.1f} M prefill + "
               f"{tot['decode_tokens'] / 1e6:.1f} M decode tokens = {tot['gpu_hours']:.2f} GPU-hours; "
               f"wall time on {gpus} GPU(s): {tot['wall_hours']:.2f} hours")
    click.echo(f"(the paper's {PAPER_GPU_SECONDS_PER_SPECTRUM} GPU-s per spectrum would give "
               f"{tot['paper_gpu_hours']:.2f} GPU-hours, {tot['paper_gpu_hours'] / gpus:.2f} hours wall)")
