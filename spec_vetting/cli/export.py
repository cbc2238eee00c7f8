"""`spec-vet export sft|verl ROOT`: training data from vetted runs (protocol section 7)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import ConfigError, SpecVettingError
from .output_path import output_file, output_folder
from .run_option import command_error, run_option

_labels_option = click.option(
    "--labels", "labels_file", type=click.Path(exists=True, dir_okay=False),
    help="labels (CSV/Parquet candidate_id, task, label) or the review page's export; override the catalog's",
)
_run_option = run_option()
_tasks_file_option = click.option(
    "--tasks-file", type=click.Path(exists=True, dir_okay=False),
    help="YAML tasks file the run used for its own tasks (default: the one recorded in the run's manifest)",
)


def _load(root, run_id, labels_file, tasks_file):
    """The run's labelled verdicts (loaded a slice at a time later), and the tasks file that gives back the
    prompts of tasks not built in."""
    from ..analysis.training_data import slices_from_catalog
    from ..catalog.read import run_tasks_file
    from .damage import warn_damaged
    from .default_run import pick_run
    from .evaluate import load_labels

    warn_damaged(root)
    try:
        run_id = pick_run(root, run_id)
        labels = load_labels(root, labels_file)
        data = slices_from_catalog(root, run_id, labels)
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    if tasks_file is None:
        recorded = run_tasks_file(root, data.run_id)
        if recorded and Path(recorded).is_file():
            tasks_file = recorded
        elif recorded:
            click.echo(f"warning: the run used tasks file {recorded}, which is not found from here; rows of its "
                       "tasks are skipped unless you pass --tasks-file", err=True)
    if tasks_file is not None:
        from ..inspect.tasks import list_tasks

        try:
            list_tasks(tasks_file)  # a broken file is the user's to fix, not a reason to skip every row
        except SpecVettingError as exc:
            raise command_error(exc) from exc
    return data, tasks_file


@click.group("export")
def export():
    """Export vetted runs as training data: `sft` (LLaMA-Factory) or `verl` (GRPO)."""


@export.command("sft")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="dataset folder")
@_labels_option
@_run_option
@_tasks_file_option
@click.option("--include-recovered", is_flag=True, help="also keep trajectories whose answer format was recovered")
@click.option("--allow-non-model-traces", is_flag=True,
              help="export a run of an engine that runs no model (rules): refused without this flag, since its "
              "traces are not model output; every record names its engine either way")
def sft(root, out_dir, labels_file, run_id, tasks_file, include_recovered, allow_non_model_traces):
    """ShareGPT records of trajectories whose verdict a label or reviewer confirmed, images, dataset_info.json.

    \b
    Examples:
      spec-vet export sft catalog/ -o sft/ --labels decisions.csv
      spec-vet export sft catalog/ -o sft/ --include-recovered
    """
    from ..analysis.training_data import export_sft

    output_folder(out_dir)
    data, tasks_file = _load(root, run_id, labels_file, tasks_file)
    try:
        summary = export_sft(data, out_dir, include_recovered=include_recovered,
                             tasks_file=tasks_file, allow_non_model=allow_non_model_traces)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(summary.text())


@export.command("verl")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out_file", required=True, type=click.Path(dir_okay=False), help="Parquet file")
@_labels_option
@_run_option
@_tasks_file_option
def verl(root, out_file, labels_file, run_id, tasks_file):
    """SpecVI-Bench-like Parquet rows (prompt, image, ground truth, create_kwargs) for GRPO with verl.

    The spectrum arrays are re-read from each candidate's file; rows whose file is gone are skipped and counted.

    \b
    Examples:
      spec-vet export verl catalog/ -o grpo.parquet --labels decisions.csv
    """
    from ..analysis.training_data import export_verl

    output_file(out_file)
    data, tasks_file = _load(root, run_id, labels_file, tasks_file)
    summary = export_verl(data, out_file, tasks_file=tasks_file)
    click.echo(summary.text())
