"""`spec-vet report ROOT -o DIR`: the static review page of a run."""

from __future__ import annotations

import click

from ..confidence import DEFAULT_REVIEW_THRESHOLD
from ..errors import SpecVettingError
from ..report.page import DEFAULT_PER_FILE, IMAGE_MODES


@click.command("report")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="folder for index.html (created)")
@click.option("--run", "run_id", help="run id (default: the latest run under ROOT)")
@click.option("--only", type=click.Choice(["review-queue"]), help="only the verdicts of the review queue")
@click.option("--threshold", type=click.FloatRange(0.5, 1.0), default=DEFAULT_REVIEW_THRESHOLD, show_default=True,
              help="confidence below which a YES/NO verdict is uncertain")
@click.option("--per-file", type=click.IntRange(min=1), default=DEFAULT_PER_FILE, show_default=True,
              help="candidates whose trajectories go in one HTML file (a bigger run is split into part-NNN.html "
                   "files; the list, filters and export in each file cover the whole run)")
@click.option("--images", type=click.Choice(IMAGE_MODES), default="auto", show_default=True,
              help="the pictures the model saw: auto = only for candidates whose spectrum file no longer reads "
                   "(the others get the interactive spectrum, their zoom windows drawn on it); all; none")
def report(root, out_dir, run_id, only, threshold, per_file, images):
    """Write a self-contained HTML review page (open DIR/index.html from disk; no server, no network).

    Reviewers filter by task, verdict and confidence, read each trajectory beside an interactive plot of the
    spectrum (read again from its file), fill in the decision and prospect-style visual-inspection fields (saved
    in the browser as they go) and export a CSV; `spec-vet review import ROOT FILE.csv` brings it back as labels.

    \b
    Examples:
      spec-vet report catalog/ -o review/
      spec-vet report catalog/ -o queue/ --only review-queue --threshold 0.9
    """
    from ..catalog.read import read_run
    from ..report.page import write_pages

    try:
        data = read_run(root, run_id)
    except SpecVettingError as exc:
        raise click.ClickException(str(exc)) from exc
    paths = write_pages(data, out_dir, threshold=threshold, only_queue=only == "review-queue", per_file=per_file,
                        images=images)
    size_mb = sum(p.stat().st_size for p in paths) / 1e6
    more = f" and {len(paths) - 1} part files beside it" if len(paths) > 1 else ""
    click.echo(f"wrote {paths[0]}{more} ({size_mb:.1f} MB, run {data.run_id}); open {paths[0].name} in a browser")
