"""`spec-vet eval ROOT`: metrics of a run against labels."""

from __future__ import annotations

import json

import click

from ..errors import SpecVettingError
from .output_path import output_folder
from .run_option import CommandError, command_error, run_option


def load_labels(root, labels_file):
    """Imported reviewer labels under the ``--labels`` file's (None when neither); says on stderr when reviewer
    labels are used. For eval and export."""
    from ..catalog.labels import labels_for

    labels, n_reviewed = labels_for(root, labels_file)
    if n_reviewed:
        click.echo(f"{n_reviewed} reviewer labels from `spec-vet review import` are used"
                   + (" (the --labels file overrides them)" if labels_file else ""), err=True)
    return labels


def load_labelled_table(root, run_id, labels_file):
    """(run id, the run's verdict rows as an Arrow table of the columns evaluation reads, labels attached): file
    labels override the reviewers', which override the catalog's. No Python object per row (memory)."""
    from ..analysis.evaluate import EVAL_COLUMNS
    from ..catalog.labels import attach_labels_table
    from ..catalog.read import read_run_table

    run_id, table = read_run_table(root, run_id, columns=EVAL_COLUMNS)
    return run_id, attach_labels_table(table, load_labels(root, labels_file))


@click.command("eval")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("--labels", "labels_file", type=click.Path(exists=True, dir_okay=False),
              help="CSV/Parquet with candidate_id, label (YES/NO) and optionally task; or the review page's export")
@run_option()
@click.option("--json", "as_json", is_flag=True, help="print a JSON object (per_task, macro_f1, ...) instead of text")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False),
              help="write confusion.png and calibration.png into this folder")
@click.option("--skip-damaged", is_flag=True,
              help="evaluate the readable rows when some of the run's verdict files are damaged (default: refuse)")
def eval_cmd(root, labels_file, run_id, as_json, plots_dir, skip_damaged):
    """Accuracy, precision, recall and F1 of YES per task, macro-F1, confusion and calibration of a run.

    UNDECIDED and ERROR count as 'not YES': wrong in accuracy, a false negative when the label is YES, never a
    false positive. A task with no row labelled YES has F1 n/a and is left out of macro-F1 (the output names it).
    Exit code 2 when ROOT holds no verdicts of the run or the label file is malformed (no rerun fixes either), 1
    when verdict files are damaged (repair, then run again).

    \b
    Examples:
      spec-vet eval catalog/                              latest run, labels from the candidate list
      spec-vet eval catalog/ --labels decisions.csv --json
      spec-vet eval catalog/ --run 20250101T020000Z-ab12cd --plots plots/
    """
    from ..analysis.evaluate import evaluate_table, format_text, write_plots
    from .damage import warn_damaged
    from .default_run import pick_run

    if plots_dir:
        output_folder(plots_dir, "--plots")
    damaged = warn_damaged(root)
    try:
        run_id = pick_run(root, run_id)
        run_id, table = load_labelled_table(root, run_id, labels_file)
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    ours = [d for d in damaged if d.table == "verdicts" and (not d.runs or run_id in d.runs)]
    if ours and not skip_damaged:
        raise CommandError(
            f"{len(ours)} verdict file(s) of run {run_id} are damaged (named above): metrics without their rows "
            "would not be the run's. Repair the catalog (`spec-vet catalog check ROOT --repair`), or pass "
            "--skip-damaged to evaluate the readable rows only")
    ev = evaluate_table(table, run_id=run_id)
    written = write_plots(ev, plots_dir) if plots_dir else []
    if as_json:
        out = ev.to_json()
        out["plots"] = [str(p) for p in written]
        click.echo(json.dumps(out, indent=2))
    else:
        click.echo(format_text(ev))
        for path in written:
            click.echo(f"wrote {path}")
