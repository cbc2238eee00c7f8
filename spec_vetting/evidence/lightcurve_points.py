"""The good epochs of each matched light curve, for the review page's plot: kept beside the evidence cache
(``ROOT/_evidence/<name>-<digest>/points-<run>-*.parquet``, written by the workers, one row per candidate:
candidate id, source name and a JSON object ``{band: [times, mags, errors]}``), not in the verdict rows, so a
catalog of verdicts stays the same size whatever the light curves' length. The page reads the points of the
candidates it shows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: the evidence cache folder under a catalog root (as :mod:`spec_vetting.pipeline.evidence`)
EVIDENCE_DIR = "_evidence"


def write_points(folder: Path, run_id: str, points: dict[str, tuple[str, dict]]) -> Path | None:
    """``points``: candidate id -> (source name, {band: [t, m, e]}); written atomically next to the cache parts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not points:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    ids = sorted(points)
    table = pa.table({"candidate_id": pa.array(ids, pa.string()),
                      "source": pa.array([points[i][0] for i in ids], pa.string()),
                      "points": pa.array([json.dumps(points[i][1]) for i in ids], pa.string())})
    n = len(list(folder.glob(f"points-{run_id}-*.parquet")))
    path = folder / f"points-{run_id}-{n}.parquet"
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def read_points(root: str | Path, candidate_ids) -> dict[str, dict[str, dict]]:
    """The light curves of ``candidate_ids`` under catalog ``root``: candidate id -> {source name: {band: [t, m,
    e]}}; the latest file wins where a candidate was matched more than once. Empty without light-curve evidence."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = {str(c) for c in candidate_ids}
    base = Path(root) / EVIDENCE_DIR
    if not wanted or not base.is_dir():
        return {}
    out: dict[str, dict[str, dict]] = {}
    files = sorted(base.glob("*/points-*.parquet"), key=lambda p: p.stat().st_mtime)
    import pyarrow as pa

    value_set = pa.array(sorted(wanted), pa.string())
    for f in files:
        table = pq.read_table(f)
        table = table.filter(pc.is_in(table.column("candidate_id"), value_set=value_set))
        for cid, src, pts in zip(*(table.column(c).to_pylist() for c in ("candidate_id", "source", "points")),
                                 strict=True):
            out.setdefault(cid, {})[src] = json.loads(pts)
    return out
