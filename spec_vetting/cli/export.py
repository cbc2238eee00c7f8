"""`spec-vet export sft|verl ROOT`: training data from vetted runs (protocol section 7)."""

from __future__ import annotations

import click

from ..errors import SpecVettingError

_labels_option = click.option(
    "--labels", "labels_file", type=click.Path(exists=True, dir_okay=False),
    help="labels (CSV/Parquet candidate_id, task, label) or the review page's export; override the catalog's",
)
_run_option = click.option("--run", "run_id", help="run id (default: the latest run under ROOT)")


def _load(root, run_id, labels_file):
    from ..report.labels import read_label_file
    from ..report.run_data import read_run

    try:
        return read_run(root, run_id), (read_label_file(labels_file) if labels_file else None)
    except SpecVettingError as exc:
        raise click.ClickException(str(exc)) from exc


@click.group("export")
def export():
    """Export vetted runs as training data: `sft` (LLaMA-Factory) or `verl` (GRPO)."""


@export.command("sft")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="dataset folder")
@_labels_option
@_run_option
@click.option("--include-recovered", is_flag=True, help="also keep trajectories whose answer format was recovered")
def sft(root, out_dir, labels_file, run_id, include_recovered):
    """ShareGPT records of trajectories whose verdict a label or reviewer confirmed, images, dataset_info.json."""
    from ..export import export_sft

    data, labels = _load(root, run_id, labels_file)
    summary = export_sft(data, out_dir, labels=labels, include_recovered=include_recovered)
    click.echo(summary.text())


@export.command("verl")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out_file", required=True, type=click.Path(dir_okay=False), help="Parquet file")
@_labels_option
@_run_option
def verl(root, out_file, labels_file, run_id):
    """SpecVI-Bench-like Parquet rows (prompt, image, ground truth, create_kwargs) for GRPO with verl.

    The spectrum arrays are re-read from each candidate's file; rows whose file is gone are skipped and counted.
    """
    from ..export import export_verl

    data, labels = _load(root, run_id, labels_file)
    summary = export_verl(data, out_file, labels=labels)
    click.echo(summary.text())
