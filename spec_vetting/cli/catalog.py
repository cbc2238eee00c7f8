"""`spec-vet catalog`: look at a catalog root without writing code (runs, counts, errors, the schema)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .output_path import folders_kept_on_success, make_parents, output_file, output_folder
from .run_option import InputError, checked_run, run_option


@click.group("catalog")
def catalog() -> None:
    """Inspect a catalog root written by `spec-vet run`."""


def _check_root(root: str) -> None:
    p = Path(root)
    if not (p / "verdicts").is_dir() and not (p / "_runs").is_dir():
        click.echo(
            f"error: {root}: not a catalog root (no verdicts/ or _runs/ inside); "
            "pass the --out folder of `spec-vet run`",
            err=True,
        )
        sys.exit(2)


@catalog.command("summary")
@click.argument("root", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def summary(root: str, as_json: bool) -> None:
    """Runs under ROOT with counts by task and verdict, and errors by kind.

    \b
    Examples:
      spec-vet catalog summary catalog/
      spec-vet catalog summary catalog/ --json
    """
    from ..analysis.evaluate import VERDICT_COLUMNS
    from ..catalog.check import summarize_catalog
    from .damage import warn_damaged

    _check_root(root)
    s = summarize_catalog(root)
    warn_damaged(root)
    if as_json:
        click.echo(json.dumps(s, indent=2, default=str))
        return
    click.echo(f"catalog {Path(root).resolve()}: {len(s['runs'])} run(s), {s['n_rows']} verdict rows")
    for r in s["runs"]:
        latest = "  (latest)" if r["run_id"] == s["latest_run_id"] else ""
        model = r.get("model") or "-"
        click.echo(
            f"run {r['run_id']}  {r.get('status') or '?'}  date {r.get('run_date') or '?'}  "
            f"engine {r.get('engine') or '?'}  model {model}{latest}"
        )
        for task, counts in sorted(r["verdicts"].items()):
            parts = "  ".join(f"{v} {counts[v]}" for v in VERDICT_COLUMNS if counts.get(v))
            click.echo(f"  {task:<10} {sum(counts.values()):>7}  {parts}")
        if r["errors_by_kind"]:
            click.echo("  errors: " + ", ".join(f"{k} {n}" for k, n in sorted(r["errors_by_kind"].items())))
    for task, counts in s.get("current", {}).items():
        click.echo(f"current {task:<10} {sum(counts.values()):>7}  "
                   + "  ".join(f"{v} {counts[v]}" for v in VERDICT_COLUMNS if counts.get(v)))
    click.echo(f"verdicts: {Path(root).resolve() / 'verdicts'}  current view: {Path(root).resolve() / 'current'}")


@catalog.command("runs")
@click.argument("root", type=click.Path(file_okay=False))
def runs(root: str) -> None:
    """One line per run: id, status, date, counts.

    \b
    Examples:
      spec-vet catalog runs catalog/
    """
    from ..catalog.damage import REPAIR_HINT, damaged_records
    from ..catalog.listing import latest_run_id, list_runs

    _check_root(root)
    latest = latest_run_id(root)
    for r in list_runs(root):
        n = (r.get("counts") or {}).get("verdicts", (r.get("counts") or {}).get("pairs", "?"))
        mark = "  (latest)" if r["run_id"] == latest else ""
        click.echo(f"{r['run_id']}\t{r.get('status')}\t{r.get('run_date')}\t{n} verdicts{mark}")
    records = damaged_records(root)
    for record in records:
        if record.run_id is not None:  # a run whose manifest cannot be read is still a run
            click.echo(f"{record.run_id}\tunreadable manifest\t?\t? verdicts")
    for record in records:
        click.echo(f"warning: {record.line()}", err=True)
    if records:
        click.echo(f"warning: {REPAIR_HINT.format(root=root)}", err=True)


@catalog.command("schema")
@click.argument("table", type=click.Choice(["verdicts", "turns"]))
def schema(table: str) -> None:
    """Every column of a catalog table with its type, unit and meaning.

    \b
    Examples:
      spec-vet catalog schema verdicts
      spec-vet catalog schema turns
    """
    from ..catalog.schema import TURNS_SCHEMA, VERDICTS_SCHEMA, column_docs

    for name, type_, unit, desc in column_docs(VERDICTS_SCHEMA if table == "verdicts" else TURNS_SCHEMA):
        click.echo(f"{name:<20} {type_:<22} {unit:<9} {desc}")


@catalog.command("compact")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
def compact(root: str) -> None:
    """Rewrite per-shard files (older roots, or a run that stopped before compacting) into few large files per
    task and table, counting only finished shards, and rebuild current/. Running it again changes nothing.

    \b
    Example:
      spec-vet catalog compact catalog/
    """
    from ..pipeline.compact import compact_root

    _check_root(root)
    with _writer_lock(root, "compact"):
        out = compact_root(root)
    for line in out.get("recovered", []):
        click.echo(f"recovered: {line}")
    for r in out["compacted"]:
        click.echo(f"run {r['run_id']}: {r['rows'].get('verdicts', 0)} verdict rows, "
                   f"{r['rows'].get('turns', 0)} turn rows -> {sum(r['files'].values())} file(s)")
    done = f"compacted {len(out['compacted'])} run(s)" if out["compacted"] else "nothing to compact"
    current = {"rebuilt": "current/ was missing and is rebuilt", "updated": "current/ updated with them"}
    click.echo(f"{done}; {current.get(out['current'], 'nothing was rewritten')}")


def _writer_lock(root: str, what: str):
    """The root's lock, as every writer takes it; held by another process: one line and exit 1 (retry later)."""
    from ..errors import RunLockedError
    from ..pipeline.lock import RootLock

    lock = RootLock(Path(root))
    try:
        lock.acquire()
    except RunLockedError as exc:
        click.echo(f"error: `catalog {what}` not done: {exc}", err=True)
        sys.exit(1)
    return _Held(lock)


class _Held:
    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        return self.lock

    def __exit__(self, *exc):
        self.lock.release()


@catalog.command("export")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(["fits", "votable", "ecsv", "csv", "parquet", "hats"]),
              required=True)
@click.option("-o", "--output", required=True, type=click.Path(),
              help="File to write (hats: a folder, replaced when it holds an earlier HATS export).")
@click.option("--current", is_flag=True, help="The current view (one row per candidate and task) instead of every run.")
@click.option("--where", default=None, help="SQL condition on the columns, e.g. \"task = 'cv' AND verdict = 'YES'\".")
@run_option("only this run's rows (default: every run)")
def export(root, fmt, output, current, where, run_id) -> None:
    """Verdict rows as FITS, VOTable, ECSV, CSV, Parquet or a HATS catalog (lsdb), with units and descriptions.

    FITS, VOTable and ECSV carry UCDs, TCOMMn descriptions and started_at as a time (TOPCAT, astropy); integer
    nulls are the type's minimum. hats writes a folder that lsdb.read_hats opens, HEALPix-partitioned, rows
    without ra/dec left out.

    \b
    Examples:
      spec-vet catalog export catalog/ --format fits -o verdicts.fits --current
      spec-vet catalog export catalog/ --format votable -o cv_yes.vot --current \\
          --where "task = 'cv' AND verdict = 'YES'"
      spec-vet catalog export catalog/ --format hats -o verdicts_hats/ --current
    """
    from ..catalog.export import export_catalog
    from ..errors import CatalogReadError
    from .damage import warn_damaged

    _check_root(root)
    run_id = checked_run(root, run_id)
    (output_folder if fmt == "hats" else output_file)(output)
    warn_damaged(root)
    try:
        with folders_kept_on_success(output if fmt == "hats" else Path(output).parent):
            n = export_catalog(root, output, fmt, current=current, where=where, run_id=run_id,
                               notice=lambda s: click.echo(f"note: {s}", err=True))
    except (CatalogReadError, FileExistsError) as exc:  # a selection or an output that no rerun fixes
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"{n} row(s) -> {output}")


@catalog.command("picture", context_settings={"ignore_unknown_options": True})
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.argument("candidate")
@click.argument("task")
@click.argument("turn", type=int)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="PNG file to write.")
@run_option("the run (default: the one of the current verdict)")
@click.option("--no-check", is_flag=True, help="Write the picture even when its hash differs from the recorded one.")
def picture(root, candidate, task, turn, output, run_id, no_check) -> None:
    """The picture the model saw on TURN (-1: the full view), stored or re-rendered and checked by its sha256.

    \b
    Examples:
      spec-vet catalog picture catalog/ spec-55862-B6212_sp06-006 cv -1 -o full.png
      spec-vet catalog picture catalog/ spec-55862-B6212_sp06-006 cv 1 -o zoom1.png
    """
    from ..catalog.pictures import turn_picture, write_picture
    from ..errors import NotInCatalogError, SpecVettingError

    _check_root(root)
    run_id = checked_run(root, run_id)
    output_file(output)
    try:
        png, row = turn_picture(root, candidate, task, turn, run_id, check=not no_check)
    except NotInCatalogError as exc:  # the command names what the catalog does not hold: no rerun changes that
        raise InputError(str(exc)) from exc
    except SpecVettingError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    write_picture(png, make_parents(output))
    click.echo(f"{output}: {len(png)} bytes, sha256 {row.get('picture_sha256')} (run {row['run_id']})")


@catalog.command("check")
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@click.option("--repair", is_flag=True,
              help="Finish what a crash left (a month merge, a write), move damaged files into ROOT/_quarantine/ and "
                   "rebuild them from the run's parts, or leave their pairs for the next `spec-vet run "
                   "--incremental`; current/ is rebuilt. Takes the root's lock like a run.")
def check(root: str, repair: bool) -> None:
    """Verify every catalog file (footer, columns, every row group) and the verdict rows per run and task against
    the run manifests. Exit 0 when sound (or repaired), 1 when damage is found and not repaired, or when --repair
    cannot repair it (it says what to do).

    \b
    Examples:
      spec-vet catalog check catalog/
      spec-vet catalog check catalog/ --repair
    """
    _check_root(root)
    if not repair:
        report, mismatches = _checked(root)
        if report.damaged or mismatches or report.records:
            from ..catalog.damage import REPAIR_HINT

            click.echo(f"{root}: {len(report.damaged)} damaged file(s), {len(report.records)} unreadable "
                       f"manifest or run-order file(s), {len(mismatches)} count mismatch(es); "
                       + REPAIR_HINT.format(root=root), err=True)
            sys.exit(1)
        return
    from ..pipeline.repair import repair_root
    from ..pipeline.rollup import recover_root

    with _writer_lock(root, "check --repair"):  # no run may write while files move
        for line in recover_root(root):
            click.echo(f"repaired: {line}")
        report, _ = _checked(root, quiet=True)
        for line in report.lines():
            click.echo(line)
        actions = repair_root(root) if report.damaged or report.records else []
        after, left = _checked(root, quiet=True)
        if any(want > have for want, have in left.values()):
            actions += _restore_from_current(root, left)
            after, left = _checked(root, quiet=True)
        for line in actions:
            click.echo(f"repaired: {line}")
    for d in after.damaged:
        click.echo(f"not repaired: {d.line()}", err=True)
    for record in after.records:
        click.echo(f"not repaired: {record.line()}", err=True)
    for (run_id, task), (want, have) in sorted(left.items()):
        if want > have:
            click.echo(f"not repaired: run {run_id} task {task}: the manifest records {want} verdict rows, {have} "
                       "are readable, and no damaged file or staged part of the run is left to rebuild them from: "
                       f"those rows are lost. To vet the pairs again, rerun that run's job with --fresh "
                       "(--incremental skips the pairs current/ still holds)", err=True)
        else:
            click.echo(f"not repaired: run {run_id} task {task}: the manifest records {want} verdict rows, "
                       f"verdicts/ holds {have}: a copy of the run's rows outside the pipeline's files? Move the "
                       f"extra file out of {Path(root) / 'verdicts'} and check again", err=True)
    if after.damaged or after.records or left:
        sys.exit(1)
    if actions:
        click.echo(f"{root}: repaired; rerun `spec-vet run ... --incremental` to vet the lost pairs again")
    else:
        click.echo(f"{root}: {after.files_checked} file(s) checked, all readable; row counts agree with the "
                   "manifests")


def _restore_from_current(root: str, short: dict) -> list[str]:
    """Rows a finished run recorded and no file holds, put back from current/ where it still holds them (then merged
    into the month's files); one line per (run, task) restored."""
    from ..pipeline.repair import restore_from_current
    from ..pipeline.rollup import recover_root

    lines = []
    for (run_id, task), (want, have) in sorted(short.items()):
        if want > have and (n := restore_from_current(root, run_id, task)):
            lines.append(f"run {run_id} task {task}: {n} of its {want - have} missing verdict row(s) restored from "
                         "current/ (their turns are lost)")
    if lines:
        recover_root(root)
    return lines


def _checked(root: str, quiet: bool = False):
    """(check_root's report, the count mismatches a quarantine record does not explain), its lines printed unless
    ``quiet``."""
    from ..catalog.check import check_root
    from ..pipeline.repair import quarantined_runs

    report = check_root(root)
    known = quarantined_runs(root)
    mismatches = {k: v for k, v in report.count_mismatches.items() if k not in known}
    if quiet:
        return report, mismatches
    for line in report.lines():
        click.echo(line)
    for run_id, task in sorted(k for k in report.count_mismatches if k in known):
        click.echo(f"run {run_id} task {task}: rows short because its damaged file was quarantined (see "
                   f"{Path(root) / '_quarantine' / 'repairs.jsonl'}); `spec-vet run --incremental` vets them again")
    if not report.damaged and not mismatches and not report.records:
        click.echo(f"{root}: {report.files_checked} file(s) checked, all readable; row counts agree with the "
                   "manifests")
    return report, mismatches
