"""`spec-vet report ROOT -o DIR`: the static review page of a run."""

from __future__ import annotations

import click

from ..confidence import DEFAULT_REVIEW_THRESHOLD
from ..errors import SpecVettingError


@click.command("report")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="folder for index.html (created)")
@click.option("--run", "run_id", help="run id (default: the latest run under ROOT)")
@click.option("--only", type=click.Choice(["review-queue"]), help="only the verdicts of the review queue")
@click.option("--threshold", type=click.FloatRange(0.5, 1.0), default=DEFAULT_REVIEW_THRESHOLD, show_default=True,
              help="confidence below which a YES/NO verdict is uncertain")
def report(root, out_dir, run_id, only, threshold):
    """Write a self-contained HTML review page (open DIR/index.html from disk; no server, no network).

    Reviewers filter by task, verdict and confidence, read each trajectory with its zoom images, mark agree /
    disagree / unsure (kept in the browser) and export a CSV that `spec-vet eval --labels` and
    `spec-vet export sft --labels` accept.
    """
    from ..report.page import write_page
    from ..report.run_data import read_run

    try:
        data = read_run(root, run_id)
    except SpecVettingError as exc:
        raise click.ClickException(str(exc)) from exc
    path = write_page(data, out_dir, threshold=threshold, only_queue=only == "review-queue")
    size_mb = path.stat().st_size / 1e6
    click.echo(f"wrote {path} ({size_mb:.1f} MB, run {data.run_id})")
