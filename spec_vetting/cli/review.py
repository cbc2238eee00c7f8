"""`spec-vet review-queue ROOT`: the verdicts a person should check, most urgent first."""

from __future__ import annotations

import csv
import sys

import click

from ..confidence import DEFAULT_REVIEW_THRESHOLD
from ..errors import SpecVettingError

QUEUE_COLUMNS = ("candidate_id", "task", "verdict", "p_yes", "status", "review_reasons", "path", "target")


@click.command("review-queue")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("--threshold", type=click.FloatRange(0.5, 1.0), default=DEFAULT_REVIEW_THRESHOLD, show_default=True,
              help="queue a YES/NO verdict whose confidence max(p_yes, 1 - p_yes) is below this")
@click.option("--run", "run_id", help="run id (default: the latest run under ROOT)")
def review_queue(root, threshold, run_id):
    """List ERROR, UNDECIDED, recovered-format, contradicting and uncertain verdicts as CSV on stdout.

    Open them in the browser with `spec-vet report ROOT -o DIR --only review-queue`.
    """
    from ..catalog.read import read_run
    from ..confidence import review_queue as select

    try:
        # the columns the queue and its CSV use: memory follows rows x these, not the whole verdict rows
        data = read_run(root, run_id, with_turns=False,
                        columns=["verdict", "label", "p_yes", "p_yes_source", "status", "path", "target"])
    except SpecVettingError as exc:
        raise click.ClickException(str(exc)) from exc
    queue = select(data.verdicts, threshold=threshold)
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(QUEUE_COLUMNS)
    for row in queue:
        p = row.get("p_yes")
        writer.writerow([
            row["candidate_id"], row["task"], row.get("verdict"), "" if p is None else f"{p:.3f}",
            row.get("status") or "", ";".join(row["review_reasons"]), row.get("path") or "", row.get("target") or "",
        ])
    click.echo(f"{len(queue)} of {len(data.verdicts)} verdicts of run {data.run_id} need review", err=True)
