"""`spec-vet report ROOT -o DIR`: the static review page of a run."""

from __future__ import annotations

import click

from ..analysis.confidence import DEFAULT_REVIEW_THRESHOLD
from ..errors import SpecVettingError
from ..report.page import DEFAULT_MAX_CANDIDATES, DEFAULT_PER_FILE, IMAGE_MODES
from .output_path import output_folder
from .run_option import command_error, run_option


@click.command("report")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="folder for index.html (created)")
@run_option()
@click.option("--only", type=click.Choice(["review-queue"]), help="only the verdicts of the review queue")
@click.option("--task", "tasks", multiple=True, help="only this task's verdicts (repeat for several)")
@click.option("--max-candidates", type=click.IntRange(min=1), default=DEFAULT_MAX_CANDIDATES, show_default=True,
              help="most verdicts on the page; a bigger selection keeps the most urgent (review-queue order) and "
                   "says how many were left out")
@click.option("--threshold", type=click.FloatRange(0.5, 1.0), default=DEFAULT_REVIEW_THRESHOLD, show_default=True,
              help="confidence below which a YES/NO verdict is uncertain")
@click.option("--per-file", type=click.IntRange(min=1), default=DEFAULT_PER_FILE, show_default=True,
              help="candidates whose trajectories go in one HTML file (a bigger run is split into part-NNN.html "
                   "files; the list, filters and export in each file cover the whole run)")
@click.option("--images", type=click.Choice(IMAGE_MODES), default="auto", show_default=True,
              help="the pictures the model saw: auto = only for candidates whose spectrum file no longer reads "
                   "(the others get the interactive spectrum, their zoom windows drawn on it); all; none")
def report(root, out_dir, run_id, only, tasks, max_candidates, threshold, per_file, images):
    """Write a self-contained HTML review page (open DIR/index.html from disk; no server, no network).

    Reviewers filter by task, verdict and confidence, read each trajectory beside an interactive plot of the
    spectrum (read again from its file), fill in the decision and prospect-style visual-inspection fields (saved
    in the browser as they go) and export a CSV; `spec-vet review import ROOT FILE.csv` brings it back as labels.

    \b
    Examples:
      spec-vet report catalog/ -o review/
      spec-vet report catalog/ -o queue/ --only review-queue --threshold 0.9
      spec-vet report catalog/ -o wd/ --task wd --max-candidates 5000

    The run is read a page file at a time (memory follows --per-file and --max-candidates, not the run).
    """
    from ..report.page import selection_from_catalog, write_pages
    from .damage import warn_damaged
    from .default_run import pick_run

    only_queue = only == "review-queue"
    output_folder(out_dir)
    warn_damaged(root)
    try:
        run_id = pick_run(root, run_id)
        selection = selection_from_catalog(root, run_id, threshold=threshold, only_queue=only_queue,
                                           tasks=list(tasks) or None, max_candidates=max_candidates)
        paths = write_pages(selection, out_dir, threshold=threshold, only_queue=only_queue, per_file=per_file,
                            images=images)
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    if selection.left_out:
        click.echo(f"warning: {selection.left_out} more verdicts were selected than --max-candidates "
                   f"{max_candidates} allows; the page holds the most urgent (narrow the selection with --only "
                   "review-queue or --task, or raise --max-candidates)", err=True)
    size_mb = sum(p.stat().st_size for p in paths) / 1e6
    more = f" and {len(paths) - 1} part files beside it" if len(paths) > 1 else ""
    click.echo(f"wrote {paths[0]}{more} ({size_mb:.1f} MB, {len(selection.index)} verdicts of run "
               f"{selection.run_id}, {selection.queued} of its {selection.total} need review); open "
               f"{paths[0].name} in a browser")
