"""Read one run of a verdict catalog into plain Python records for evaluation, the review page and export.

The catalog layout is the pipeline's (ROOT/verdicts/run_date=.../task=.../*.parquet and ROOT/turns/..., hive
partitioned). ``spec_vetting.catalog`` owns the schema and the readers; this module only asks it for one run and
turns the Arrow tables into dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import catalog
from ..errors import CatalogReadError


@dataclass
class RunData:
    root: str
    run_id: str
    verdicts: list[dict[str, Any]]
    #: (candidate_id, task) -> turn rows sorted by turn number (turn -1 = the full view)
    turns: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def initial_image(self, candidate_id: str, task: str) -> bytes | None:
        """The full-spectrum picture the model saw first: the image of the turn -1 row."""
        for row in self.turns.get((candidate_id, task), []):
            if row.get("turn") == -1 and row.get("image_png"):
                return row["image_png"]
        return None

    def assistant_turns(self, candidate_id: str, task: str) -> list[dict[str, Any]]:
        return [r for r in self.turns.get((candidate_id, task), []) if (r.get("turn") or 0) >= 0]


def read_run(root, run_id: str | None = None, *, with_turns: bool = True) -> RunData:
    """Verdicts (and turns) of ``run_id``, or of the latest run under ``root`` when None."""
    root = Path(root)
    if not (root / "verdicts").is_dir():
        raise CatalogReadError(
            f"{root}: no verdicts/ folder here; pass the --out folder of a `spec-vet run` (the catalog root)"
        )
    if run_id is None:
        run_id = catalog.latest_run_id(root)
    if run_id is None:  # no run manifest: take the newest run present in the rows
        table = catalog.read_verdicts(root, columns=["run_id", "run_date"])
        if table.num_rows == 0:
            raise CatalogReadError(f"{root}: the catalog holds no run yet; run `spec-vet run` first")
        run_id = _latest(table)
    verdicts = catalog.read_verdicts(root, run_id=run_id)
    if verdicts.num_rows == 0:
        raise CatalogReadError(
            f"{root}: run {run_id!r} has no verdict rows; list the runs with `spec-vet catalog runs {root}`"
        )
    data = RunData(root=str(root), run_id=str(run_id), verdicts=verdicts.to_pylist())
    if with_turns:
        data.turns = _read_turns(root, str(run_id))
    return data


def run_manifest(root, run_id: str) -> dict:
    """ROOT/_runs/<run_id>/manifest.json as written by the pipeline; {} when it is absent or unreadable."""
    try:
        return catalog.read_manifest(root, str(run_id))
    except (OSError, ValueError):
        return {}


def run_tasks_file(root, run_id: str) -> str | None:
    """The ``--tasks-file`` the run was started with (as recorded; may be relative to where it was started)."""
    job = run_manifest(root, run_id).get("job") or {}
    value = job.get("tasks_file") if isinstance(job, dict) else None
    return str(value) if value else None


def _latest(table: pa.Table) -> str:
    """The run with the newest run_date; run ids break ties (they sort by start time in the pipeline's naming)."""
    return max(zip(table.column("run_date").to_pylist(), table.column("run_id").to_pylist()))[1]


def _read_turns(root: Path, run_id: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        table = catalog.read_turns(root, run_id=run_id)
    except FileNotFoundError:
        return out
    for row in table.to_pylist():
        key = (str(row["candidate_id"]), str(row["task"]))
        out.setdefault(key, []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r.get("turn") if r.get("turn") is not None else 0)
    return out
