"""`spec-vet review-queue ROOT`: the verdicts a person should check, most urgent first; `spec-vet review import ROOT
decisions.csv`: the review page's export brought back as labels (ROOT/_review/decisions.csv)."""

from __future__ import annotations

import csv
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from ..analysis.confidence import DEFAULT_REVIEW_THRESHOLD
from ..errors import SpecVettingError
from .run_option import InputError, command_error, run_option

QUEUE_COLUMNS = ("candidate_id", "task", "verdict", "p_yes", "status", "review_reasons", "reason", "error_kind",
                 "error_message", "path", "target")


def _one_line(text) -> str:
    return " ".join(str(text).split()) if text else ""


@click.command("review-queue")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.option("--threshold", type=click.FloatRange(0.5, 1.0), default=DEFAULT_REVIEW_THRESHOLD, show_default=True,
              help="queue a YES/NO verdict whose confidence max(p_yes, 1 - p_yes) is below this")
@run_option()
def review_queue(root, threshold, run_id):
    """List ERROR, UNDECIDED, recovered-format, contradicting and uncertain verdicts, and verdicts that contradict
    significant Gaia astrometry (evidence_disagrees, right after ERROR), as CSV on stdout.

    Columns: candidate_id, task, verdict, p_yes, status, review_reasons, reason (why UNDECIDED), error_kind and
    error_message (ERROR rows), path, target.

    Open them in the browser with `spec-vet report ROOT -o DIR --only review-queue`.

    \b
    Examples:
      spec-vet review-queue catalog/ > queue.csv
      spec-vet review-queue catalog/ --threshold 0.9 --run 20250101T020000Z-ab12cd
    """
    from ..analysis.review_queue import CONFIDENCE, REASONS, queue
    from .damage import warn_damaged
    from .default_run import pick_run

    warn_damaged(root)
    try:
        run_id = pick_run(root, run_id)
        scan, batches = queue(root, run_id, ["p_yes", "status", "reason", "error_kind", "error_message", "path",
                                             "target", "verdict"], threshold=threshold)
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(QUEUE_COLUMNS)
        for batch in batches:  # most urgent first, a batch at a time
            for row in batch.drop_columns([CONFIDENCE]).to_pylist():
                p = row["p_yes"]
                writer.writerow([
                    row["candidate_id"], row["task"], row["verdict"], "" if p is None else f"{p:.3f}",
                    row["status"] or "", row[REASONS], _one_line(row["reason"]), row["error_kind"] or "",
                    _one_line(row["error_message"]), row["path"] or "", row["target"] or "",
                ])
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    click.echo(f"{scan.queued} of {scan.total} verdicts of run {scan.run_id} need review", err=True)


@click.group("review")
def review():
    """Reviewers' decisions: bring the review page's export back into the catalog."""


#: columns of ROOT/_review/decisions.csv: the page's export, then where each row came from
def _stored_columns():
    from ..catalog.review_schema import REVIEW_CSV_COLUMNS

    return list(REVIEW_CSV_COLUMNS) + ["imported_at", "source"]


def read_decisions(path) -> list[dict]:
    """Rows of a review-page export (UTF-8 CSV); an :class:`InputError` (exit 2) naming the problem otherwise."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            columns = reader.fieldnames or []
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: not a UTF-8 CSV file ({exc})") from exc
    # the header decides, also for a file without rows (an empty file or another text is no export)
    if "candidate_id" not in columns or "task" not in columns:
        raise InputError(f"{path}: needs candidate_id and task columns (the review page's export has them;"
                         f" columns here: {', '.join(columns) or 'none'})")
    return rows


def _field_problems(decision: str, quality: str, issues: str, spectype: str, vi_z: str) -> list[str]:
    """What in a row's fields (already stripped and cased) is not the review page's vocabulary."""
    from ..catalog.review_schema import DECISIONS, VI_ISSUES, VI_QUALITY, VI_SPECTYPES

    bad = []
    if decision and decision not in DECISIONS:
        bad.append(f"decision {decision!r} (one of {', '.join(DECISIONS)})")
    if quality and quality not in VI_QUALITY:
        bad.append(f"vi_quality {quality!r} (0-4)")
    if any(ch not in VI_ISSUES for ch in issues):
        bad.append(f"vi_issues {issues!r} (letters {''.join(VI_ISSUES)})")
    if spectype and spectype not in VI_SPECTYPES:
        bad.append(f"vi_spectype {spectype!r} (one of {', '.join(VI_SPECTYPES)})")
    try:
        if vi_z:
            float(vi_z)
    except ValueError:
        bad.append(f"vi_z {vi_z!r}")
    return bad


def _write_stored(path: Path, stored: dict[tuple[str, str], dict]) -> None:
    """ROOT/_review/decisions.csv, sorted by (candidate_id, task), written to a temporary file then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    columns = _stored_columns()
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for k in sorted(stored):
            writer.writerow({c: stored[k].get(c, "") for c in columns})
    tmp.replace(path)


def import_decisions(root, decisions_file, run_id=None) -> dict:
    """Check the decisions against the run they were made on and merge them into ROOT/_review/decisions.csv.

    Returns counts. A row whose (candidate_id, task) the run does not have, whose verdict is not the run's, or whose
    fields are not the page's vocabulary stops the import before anything is written (exit 2: the file must be
    fixed; a rerun would fail the same way). An unknown run exits 1, as in every command.
    """
    from ..catalog.labels import normalise_label, read_label_file, reviewed_labels_path
    from ..catalog.review_schema import label_from_decision
    from ..catalog.run_data import read_run

    rows = read_decisions(decisions_file)
    runs_named = {r.get("run_id") for r in rows if r.get("run_id")}
    if run_id is None and len(runs_named) > 1:
        raise InputError(f"{decisions_file}: decisions of several runs ({', '.join(sorted(runs_named))});"
                                   " import them one run at a time with --run")
    if run_id is None and runs_named:
        run_id = runs_named.pop()
    try:
        data = read_run(root, run_id, with_turns=False)
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    verdicts = {(str(v["candidate_id"]), str(v["task"])): v.get("verdict") for v in data.verdicts}
    problems, clean = [], []
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for i, row in enumerate(rows, start=2):  # line 1 is the header
        cid, task = (row.get("candidate_id") or "").strip(), (row.get("task") or "").strip()
        where = f"line {i} ({cid}/{task})"
        if (cid, task) not in verdicts:
            problems.append(f"{where}: run {data.run_id} has no such verdict")
            continue
        verdict = verdicts[(cid, task)]
        if (row.get("verdict") or "").strip() and row["verdict"].strip().upper() != verdict:
            problems.append(f"{where}: the decision was made on verdict {row['verdict'].strip()}, "
                            f"the run's is {verdict}")
            continue
        decision = (row.get("decision") or "").strip().lower()
        quality = (row.get("vi_quality") or "").strip()
        issues = (row.get("vi_issues") or "").strip().upper()
        vi_z = (row.get("vi_z") or "").strip()
        spectype = (row.get("vi_spectype") or "").strip().upper()
        bad = _field_problems(decision, quality, issues, spectype, vi_z)
        try:
            label = normalise_label(row.get("label"), path=decisions_file, row=i - 1)
        except SpecVettingError as exc:
            bad.append(str(exc))
            label = None
        if bad:
            problems.append(f"{where}: " + "; ".join(bad))
            continue
        implied = label_from_decision(verdict, decision or None)
        if label is not None and implied is not None and label != implied:
            problems.append(f"{where}: label {label} contradicts decision {decision} on verdict {verdict}")
            continue
        clean.append({
            **{k: (row.get(k) or "").strip() for k in ("comment", "reviewer", "reviewed_at")},
            "candidate_id": cid, "task": task, "verdict": verdict, "decision": decision,
            "label": label or implied or "",
            "vi_quality": quality, "vi_issues": issues, "vi_z": vi_z, "vi_spectype": spectype,
            "run_id": data.run_id, "imported_at": now, "source": str(Path(decisions_file).resolve()),
        })
    if problems:
        more = f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""
        raise InputError(f"{decisions_file}: nothing imported; " + "; ".join(problems[:8]) + more)
    path = reviewed_labels_path(root)
    stored: dict[tuple[str, str], dict] = {}
    if path.is_file():
        for r in read_decisions(path):
            stored[(r["candidate_id"], r["task"])] = r
    for r in clean:
        stored[(r["candidate_id"], r["task"])] = r  # a later decision on the same verdict replaces the earlier one
    _write_stored(path, stored)
    labels = read_label_file(path)
    new_labels = [r["label"] for r in clean if r["label"]]
    return {"path": path, "run_id": data.run_id, "rows": len(clean), "labels": len(new_labels),
            "yes": new_labels.count("YES"), "no": new_labels.count("NO"), "stored": len(stored),
            "stored_labels": len(labels)}


@review.command("import")
@click.argument("root", type=click.Path(exists=True, file_okay=False))
@click.argument("decisions_file", metavar="DECISIONS.csv", type=click.Path(exists=True, dir_okay=False))
@run_option("run the decisions were made on (default: the export's run_id column, else the latest run under ROOT)")
def import_cmd(root, decisions_file, run_id):
    """Bring a review-page export back as labels: checked against the run, kept in ROOT/_review/decisions.csv.

    `spec-vet eval ROOT` and `spec-vet export sft|verl ROOT` then use these labels (over the catalog's; a
    --labels file overrides them). Importing again replaces earlier decisions on the same verdicts and keeps the
    rest. agree/disagree on a YES/NO verdict gives a label; unsure, or a decision on ERROR/UNDECIDED, keeps the
    visual-inspection fields without one.

    \b
    Example:
      spec-vet report catalog/ -o review/          review in the browser, then "Export CSV"
      spec-vet review import catalog/ ~/Downloads/review-RUNID.csv
      spec-vet eval catalog/                        metrics against the reviewers' labels
    """
    got = import_decisions(root, decisions_file, run_id)
    click.echo(f"imported {got['rows']} decisions on run {got['run_id']} ({got['labels']} labels: {got['yes']} YES, "
               f"{got['no']} NO) into {got['path']}; it holds {got['stored']} decisions, {got['stored_labels']} "
               "labels, which `spec-vet eval` and `spec-vet export sft|verl` now use")
