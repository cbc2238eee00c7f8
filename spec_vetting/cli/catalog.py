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
    from ..catalog.read import summarize_catalog
    from ..evaluate import VERDICT_COLUMNS
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
    from ..catalog.read import latest_run_id, list_runs

    _check_root(root)
    latest = latest_run_id(root)
    for r in list_runs(root):
        n = (r.get("counts") or {}).get("verdicts", (r.get("counts") or {}).get("pairs", "?"))
        mark = "  (latest)" if r["run_id"] == latest else ""
        click.echo(f"{r['run_id']}\t{r.get('status')}\t{r.get('run_date')}\t{n} verdicts{mark}")


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
    from ..pipeline.lock import RootLock

    _check_root(root)
    lock = RootLock(Path(root))
    lock.acquire()
    try:
        out = compact_root(root)
    finally:
        lock.release()
    for r in out["compacted"]:
        click.echo(f"run {r['run_id']}: {r['rows'].get('verdicts', 0)} verdict rows, "
                   f"{r['rows'].get('turns', 0)} turn rows -> {sum(r['files'].values())} file(s)")
    done = f"compacted {len(out['compacted'])} run(s)" if out["compacted"] else "nothing to compact"
    current = {"rebuilt": "current/ was missing and is rebuilt", "updated": "current/ updated with them"}
    click.echo(f"{done}; {current.get(out['current'], 'nothing was rewritten')}")


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
              help="Move damaged files into ROOT/_quarantine/ and rebuild them from the run's parts, or leave their "
                   "pairs for the next `spec-vet run --incremental`; current/ is rebuilt.")
def check(root: str, repair: bool) -> None:
    """Verify every catalog file (footer, columns, every row group) and the verdict rows per run and task against
    the run manifests. Exit 0 when sound (or repaired), 1 when damage is found and not repaired.

    \b
    Examples:
      spec-vet catalog check catalog/
      spec-vet catalog check catalog/ --repair
    """
    from ..catalog.damage import REPAIR_HINT, check_root
    from ..pipeline.lock import RootLock
    from ..pipeline.repair import quarantined_runs, repair_root

    _check_root(root)
    report = check_root(root)
    known = quarantined_runs(root)
    mismatches = {k: v for k, v in report.count_mismatches.items() if k not in known}
    for line in report.lines():
        click.echo(line)
    for run_id, task in sorted(k for k in report.count_mismatches if k in known):
        click.echo(f"run {run_id} task {task}: rows short because its damaged file was quarantined (see "
                   f"{Path(root) / '_quarantine' / 'repairs.jsonl'}); `spec-vet run --incremental` vets them again")
    if not report.damaged and not mismatches:
        click.echo(f"{root}: {report.files_checked} file(s) checked, all readable; row counts agree with the "
                   "manifests")
        return
    if not repair:
        click.echo(f"{root}: {len(report.damaged)} damaged file(s), {len(mismatches)} count mismatch(es); "
                   + REPAIR_HINT.format(root=root), err=True)
        sys.exit(1)
    with RootLock(Path(root)):  # no run may write while files move
        actions = repair_root(root)
    for line in actions:
        click.echo(f"repaired: {line}")
    after = check_root(root)
    if after.damaged:
        for d in after.damaged:
            click.echo(f"still damaged: {d.line()}", err=True)
        sys.exit(1)
    click.echo(f"{root}: repaired; rerun `spec-vet run ... --incremental` to vet the lost pairs again")
