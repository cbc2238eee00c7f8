"""Read one run of a verdict catalog into plain Python records for evaluation, the review page and export.

The catalog layout is the pipeline's (ROOT/verdicts/run_date=.../task=.../*.parquet and ROOT/turns/..., hive
partitioned). ``spec_vetting.catalog`` owns the schema and the readers; this module only asks it for one run and
turns the Arrow tables into dicts. When ``spec_vetting.catalog`` is not importable (a partial install, or while it
is being written) the same hive layout is read with pyarrow directly, so the consumers keep working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SpecVettingError


class CatalogReadError(SpecVettingError):
    """ROOT holds no readable verdict catalog, or not the run asked for."""

    kind = "catalog_read_error"


@dataclass
class RunData:
    root: str
    run_id: str
    verdicts: list[dict[str, Any]]
    #: (candidate_id, task) -> turn rows sorted by turn number (turn -1 = the full view, when the pipeline writes it)
    turns: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def initial_image(self, candidate_id: str, task: str) -> bytes | None:
        """The full-spectrum picture the model saw first: a turn -1 row, or the ``initial_image_png`` column."""
        for row in self.turns.get((candidate_id, task), []):
            if row.get("turn") == -1 and row.get("image_png"):
                return row["image_png"]
            if row.get("initial_image_png"):
                return row["initial_image_png"]
        return None

    def assistant_turns(self, candidate_id: str, task: str) -> list[dict[str, Any]]:
        return [r for r in self.turns.get((candidate_id, task), []) if (r.get("turn") or 0) >= 0]


def _catalog_module():
    try:
        from .. import catalog  # the pipeline's readers (preferred)
    except ImportError:
        return None
    return catalog


def _read_hive(root: Path, table: str) -> pa.Table | None:
    """Every part file under ROOT/<table>, with the hive partition values (key=value folders) as string columns."""
    import pyarrow.parquet as pq

    base = root / table
    if not base.is_dir():
        return None
    parts = []
    for path in sorted(base.rglob("*.parquet")):
        if path.name.startswith((".", "_")):
            continue  # unfinished writes and metadata files
        part = pq.read_table(path)
        for folder in path.relative_to(base).parts[:-1]:
            key, sep, value = folder.partition("=")
            if sep and key not in part.column_names:
                part = part.append_column(key, pa.array([value] * part.num_rows, pa.string()))
        parts.append(part)
    if not parts:
        return None
    return pa.concat_tables(parts, promote_options="permissive")


def _run_ids(table: pa.Table) -> list[str]:
    if "run_id" not in table.column_names:
        raise CatalogReadError("verdict catalog has no run_id column; was it written by `spec-vet run`?")
    return sorted({str(v) for v in table.column("run_id").to_pylist() if v is not None})


def read_run(root, run_id: str | None = None, *, with_turns: bool = True) -> RunData:
    """Verdicts (and turns) of ``run_id``, or of the latest run under ``root`` when None."""
    root = Path(root)
    if not (root / "verdicts").is_dir():
        raise CatalogReadError(
            f"{root}: no verdicts/ folder here; pass the --out folder of a `spec-vet run` (the catalog root)"
        )
    catalog = _catalog_module()
    if catalog is not None:
        if run_id is None:
            run_id = catalog.latest_run_id(root)
        if run_id is None:  # no run manifest: take the newest run present in the rows
            table = catalog.read_verdicts(root)
            if table.num_rows == 0:
                raise CatalogReadError(f"{root}: the catalog holds no run yet; run `spec-vet run` first")
            run_id = _latest(table, _run_ids(table))
        verdicts = catalog.read_verdicts(root, run_id=run_id)
    else:
        table = _read_hive(root, "verdicts")
        if table is None:
            raise CatalogReadError(f"{root}/verdicts: no parquet files; run `spec-vet run` first")
        runs = _run_ids(table)
        if run_id is None:
            run_id = _latest(table, runs)
        verdicts = table.filter(pc.equal(table.column("run_id"), run_id))
    if verdicts.num_rows == 0:
        raise CatalogReadError(
            f"{root}: run {run_id!r} has no verdict rows; list the runs with `spec-vet catalog runs {root}`"
        )
    rows = verdicts.to_pylist()
    for row in rows:
        row["candidate_id"] = str(row["candidate_id"])
        for key in ("run_date", "task"):
            if key in row and row[key] is not None:
                row[key] = str(row[key])
    data = RunData(root=str(root), run_id=str(run_id), verdicts=rows)
    if with_turns:
        data.turns = _read_turns(root, str(run_id), catalog)
    return data


def run_manifest(root, run_id: str) -> dict:
    """ROOT/_runs/<run_id>/manifest.json as written by the pipeline; {} when it is absent or unreadable."""
    import json

    path = Path(root) / "_runs" / str(run_id) / "manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def run_tasks_file(root, run_id: str) -> str | None:
    """The ``--tasks-file`` the run was started with (as recorded; may be relative to where it was started)."""
    job = run_manifest(root, run_id).get("job") or {}
    value = job.get("tasks_file") if isinstance(job, dict) else None
    return str(value) if value else None


def _latest(table: pa.Table, runs: list[str]) -> str:
    """The run with the newest run_date; run ids break ties (they sort by start time in the pipeline's naming)."""
    if "run_date" in table.column_names:
        dated = sorted(
            {(str(d), str(r)) for d, r in zip(table.column("run_date").to_pylist(), table.column("run_id").to_pylist())}
        )
        return dated[-1][1]
    return runs[-1]


def _read_turns(root: Path, run_id: str, catalog) -> dict[tuple[str, str], list[dict[str, Any]]]:
    if catalog is not None:
        try:
            table = catalog.read_turns(root, run_id=run_id)
        except FileNotFoundError:
            table = None
    else:
        table = _read_hive(root, "turns")
        if table is not None and "run_id" in table.column_names:
            table = table.filter(pc.equal(table.column("run_id"), run_id))
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    if table is None:
        return out
    for row in table.to_pylist():
        key = (str(row["candidate_id"]), str(row["task"]))
        out.setdefault(key, []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r.get("turn") if r.get("turn") is not None else 0)
    return out
