"""CPU of merging one small night into its month's file, by the size of that file (``rollup._merge``).

The month file is made of the real rows of a month file that ``bench_history.py`` wrote (its ``--root``), tiled to
the size asked, with the per-row columns (ids, times, coordinates, scores, justification numbers) made distinct so
that it compresses like a real month; then a 6-row night is merged into it. ``MONTH_BYTES=N`` in the environment
overrides the month-file cap (``rollup.MONTH_BYTES``), e.g. to measure a file past it.

    PYTHONPATH=. python benchmarks/bench_month_merge.py HISTORY_ROOT/cat WORK_DIR 16 64 [256]
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spec_vetting.pipeline import rollup

RUN = "20260520T000000Z-abcdef"


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def month_rows(base: pa.Table, n: int, rng) -> pa.Table:
    """``n`` rows of ``base`` tiled, the per-row columns made distinct."""
    t = pa.concat_tables([base] * (n // base.num_rows + 1)).slice(0, n)
    x, y, z = (rng.random((3, n)) * 100).tolist()
    columns = {
        "candidate_id": pa.array([f"c{k:09d}" for k in range(n)]),
        "p_yes": pa.array(rng.random(n)),
        "ra": pa.array(rng.random(n) * 360),
        "dec": pa.array(rng.random(n) * 180 - 90),
        "elapsed_s": pa.array(rng.random(n) * 20),
        "_healpix_29": pa.array(rng.integers(0, 1 << 62, n)),
        "justification": pa.array([f"EW(Ha) = {a:.2f} +- {b:.2f} A (below -20.00 A at {c:.1f} sigma)"
                                   for a, b, c in zip(x, y, z, strict=True)]),
    }
    for name, values in columns.items():
        i = t.schema.get_field_index(name)
        t = t.set_column(i, t.schema.field(i), values)
    return t


def main() -> None:
    src, work, sizes = Path(sys.argv[1]), Path(sys.argv[2]), [int(a) for a in sys.argv[3:]]
    rollup.MONTH_BYTES = int(os.environ.get("MONTH_BYTES", rollup.MONTH_BYTES))
    path = sorted((src / "verdicts").glob("*/part-month-cv-0.parquet"))[0]
    meta = pq.read_schema(path).metadata
    base = pq.read_table(path)
    rng = np.random.default_rng(0)
    work.mkdir(parents=True, exist_ok=True)
    probe = work / "probe.parquet"
    pq.write_table(month_rows(base, 100_000, rng), probe, compression="zstd")
    per_row = probe.stat().st_size / 100_000
    for mb in sizes:
        root = work / f"m{mb}"
        shutil.rmtree(root, ignore_errors=True)
        folder = root / "verdicts" / "2026-05"
        folder.mkdir(parents=True)
        n = int(mb * 1e6 / per_row)
        target = folder / "part-month-cv-0.parquet"
        pq.write_table(month_rows(base, n, rng).replace_schema_metadata(meta), target, compression="zstd",
                       row_group_size=128 * 1024)
        size = target.stat().st_size
        day = root / "verdicts" / "2026-05-20"
        day.mkdir()
        night = base.slice(0, 6)
        night = night.set_column(night.schema.get_field_index("run_id"), "run_id", pa.array([RUN] * 6))
        own = day / f"part-{RUN}-cv-0.parquet"
        pq.write_table(night.replace_schema_metadata(meta), own, compression="zstd")
        c0, w0 = cpu_s(), time.perf_counter()
        rollup._merge(root, "verdicts", "2026-05-20", "cv", RUN, own)
        print(json.dumps({"month_file_mb": round(size / 1e6, 1), "rows": n, "bytes_per_row": round(per_row),
                          "merge_cpu_s": round(cpu_s() - c0, 2), "merge_wall_s": round(time.perf_counter() - w0, 2)}),
              flush=True)
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
