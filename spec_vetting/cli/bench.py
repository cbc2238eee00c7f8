"""`spec-vet bench specvi DIR`: run SpecVI-Bench parquet files end to end through the pipeline and evaluate.

Each row of a SpecVI-Bench file (e.g. ``test_cv.parquet``) is a candidate: the task from ``data_source``, the
prompt from the file, the spectrum inline (``create_kwargs``), the label from ``reward_model.ground_truth``. The
pipeline (``spec_vetting.pipeline.run_job``) writes a normal catalog under ``--out``; the evaluation is then
``spec-vet eval`` on that run, with the published Table 1 beside it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import click

from ..errors import ConfigError, SpecVettingError
from .output_path import output_folder
from .run_option import command_error


@click.group("bench")
def bench():
    """Benchmarks with known answers."""


@bench.command("specvi")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--engine", default="rules", show_default=True, help="rules | openai | local | scripted | module:Class")
@click.option("--endpoint", "endpoints", multiple=True, help="OpenAI-compatible base URL with /v1 (repeatable)")
@click.option("--model", help="served model id (openai) or local model folder (local)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("specvi-bench-catalog"), show_default=True,
              help="catalog root the run is written to (runs accumulate; a rerun resumes)")
@click.option("--pattern", default="*.parquet", show_default=True, help="which files of FOLDER (e.g. 'test_*.parquet')")
@click.option("--workers", type=int, help="Dask workers (default: the pipeline's)")
@click.option("--in-process", is_flag=True, help="run shards in threads of this process (no worker processes)")
@click.option("--rerender", is_flag=True,
              help="draw each row's first picture with this project's renderer instead of showing the row's own "
                   "full view (`images`, the picture the model saw in training); to compare the two")
@click.option("--json", "as_json", is_flag=True, help="print the evaluation as JSON")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False), help="write evaluation plots here")
def specvi(folder, engine, endpoints, model, out_dir, pattern, workers, in_process, rerender, as_json, plots_dir):
    """Vet every row of the SpecVI-Bench files in FOLDER and print accuracy / F1 per task and macro-F1.

    The first picture of each inspection is the row's own full view (`images`), as in training; --rerender draws it
    instead. The catalog's initial_image_source column says which each verdict was shown.

    \b
    Examples:
      spec-vet bench specvi specvi/ --pattern 'test_*.parquet'                 rules engine
      spec-vet bench specvi specvi/ --engine openai --endpoint http://gpu01:30000/v1 --json
    """
    from ..analysis.evaluate import evaluate, format_text, write_plots
    from ..catalog.labels import attach_labels
    from ..catalog.run_data import read_run
    from ..pipeline import job_from_dict, run_job

    output_folder(out_dir, "--out")
    if plots_dir:
        output_folder(plots_dir, "--plots")
    files = sorted(p for p in folder.glob(pattern) if p.is_file())
    if not files:
        raise click.UsageError(f"{folder}: no file matches {pattern!r}; pass the folder holding e.g. test_cv.parquet")
    job = {
        "candidates": [str(p) for p in files],
        "out": str(out_dir),
        "engine": {"name": engine, "endpoints": list(endpoints), **({"model": model} if model else {})},
        "specvi_rerender": rerender,
        "cluster": {"dashboard": False, **({"workers": workers} if workers else {}),
                    **({"processes": False} if in_process else {})},
    }
    try:
        outcome = run_job(job_from_dict(job, "bench specvi"), echo=lambda s: click.echo(s, err=True))
        data = read_run(out_dir, outcome.run_id, with_turns=False)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    attach_labels(data.verdicts)
    ev = evaluate(data.verdicts, run_id=data.run_id)
    written = write_plots(ev, plots_dir) if plots_dir else []
    pictures = dict(sorted(Counter(r.get("initial_image_source") or "none" for r in data.verdicts).items()))
    if as_json:
        out = ev.to_json()
        out.update(root=str(out_dir), files=[str(p) for p in files], plots=[str(p) for p in written],
                   first_pictures=pictures)
        click.echo(json.dumps(out, indent=2))
    else:
        click.echo(f"{len(files)} SpecVI-Bench file(s), catalog {out_dir}; first pictures: "
                   + ", ".join(f"{k} {n}" for k, n in pictures.items()))
        click.echo(format_text(ev))
