"""`spec-vet catalog`: look at a catalog root without writing code (runs, counts, errors, the schema)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.group("catalog")
def catalog() -> None:
    """Inspect a catalog root written by `spec-vet run`."""


def _check_root(root: str) -> None:
    p = Path(root)
    if not (p / "verdicts").is_dir() and not (p / "_runs").is_dir():
        click.echo(
            f"error: {root}: not a catalog root (no verdicts/ or _runs/ inside); pass the --out folder of `spec-vet run`",
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

    _check_root(root)
    s = summarize_catalog(root)
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
    click.echo(f"verdicts: {Path(root).resolve() / 'verdicts'}  (pyarrow.dataset(..., partitioning='hive'))")


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
