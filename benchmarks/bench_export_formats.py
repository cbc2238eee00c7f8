"""Peak memory of ``spec-vet catalog export`` per format at two row counts: flat in N when every format streams.

    PYTHONPATH=. python benchmarks/bench_export_formats.py [--rows 50000 400000] [--formats fits votable ecsv hats]
        [--json out.json]

Writes a catalog-like root (one compacted ``verdicts`` file of synthetic rows: the real schema, texts of a few
hundred characters with some non-ASCII, nulls in ids and floats) per row count into a temporary folder, then
exports it to each format in a fresh Python process and reports that process's peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``), its wall time and the file size (hats: the folder's files; it
gathers the rows in memory by design, so its peak grows with N). The import baseline (pyarrow,
astropy, duckdb loaded, nothing exported) is reported too: what the export adds is peak minus baseline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
#: rows per Parquet row group of the synthetic file (what a reader decodes at once)
ROW_GROUP = 1 << 16

CHILD = r"""
import resource, sys, time
from spec_vetting.catalog.export import export_catalog
import astropy.table, astropy.io.fits, astropy.io.votable, duckdb  # noqa: the baseline loads them too
root, out, fmt = sys.argv[1:4]
if fmt == "hats":  # lsdb's import (dask, numba) is not the export's time: loaded before the clock starts
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import lsdb  # noqa: F401
t0 = time.perf_counter()
n = export_catalog(root, out, fmt) if fmt != "baseline" else 0
print(n, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def synthetic_root(folder: Path, n: int, seed: int = 0) -> Path:
    """A root whose ``verdicts`` has ``n`` rows of the catalog's schema (vectorized: seconds at a million)."""
    from spec_vetting.catalog.schema import file_schema, text_lengths, with_reader_metadata

    rng = np.random.default_rng(seed)
    schema = file_schema("verdicts")
    i = np.arange(n)
    cols = {}
    for f in schema:
        t = f.type
        if pa.types.is_string(t):
            cols[f.name] = pa.array(np.char.add(f"{f.name[:6]}-", i.astype(str)))
        elif pa.types.is_integer(t):
            cols[f.name] = pa.array(rng.integers(0, 1 << (40 if t.bit_width == 64 else 20), n), t, mask=i % 7 == 3)
        elif pa.types.is_floating(t):
            cols[f.name] = pa.array(rng.normal(size=n), t, mask=i % 5 == 1)
        elif pa.types.is_timestamp(t):
            cols[f.name] = pa.array(1_767_225_600_000 + i * 1000, pa.int64()).cast(t)
        else:  # binary (image_png): null, as in a catalog without stored pictures
            cols[f.name] = pa.nulls(n, t)
    words = np.array(["broad Hα emission at 6563 Å, ", "no clear feature; ", "double-peaked Balmer lines "])
    cols["justification"] = pa.array(np.char.multiply(words[i % 3], 1 + i % 12))  # up to ~350 characters
    cols["targetid"] = pa.array(39627866878511337 + i, pa.int64(), mask=i % 3 == 0)
    cols["verdict"] = pa.array(np.array(["YES", "NO", "UNDECIDED"])[i % 3])
    table = pa.table(cols, schema=schema)
    path = folder / "verdicts" / "2026-01-01" / "part-bench-cv-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table.cast(with_reader_metadata(schema, text_lengths(table))), path, row_group_size=ROW_GROUP)
    return folder


def measure(root: Path, fmt: str, out: Path) -> dict:
    res = subprocess.run([sys.executable, "-c", CHILD, str(root), str(out), fmt], capture_output=True, text=True,
                         check=True, cwd=REPO)
    n, wall, rss_kb = res.stdout.split()
    files = [out] if out.is_file() else [p for p in out.rglob("*") if p.is_file()] if out.is_dir() else []
    size = sum(p.stat().st_size for p in files)
    return {"format": fmt, "rows": int(n), "wall_s": round(float(wall), 2), "peak_rss_mb": int(rss_kb) // 1024,
            "file_mb": round(size / 2**20, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[50_000, 400_000])
    ap.add_argument("--formats", nargs="+", default=["fits", "votable", "ecsv", "csv", "parquet"])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--make-root", nargs=2, metavar=("ROOT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.make_root:
        synthetic_root(Path(args.make_root[0]), int(args.make_root[1]))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            t0 = time.perf_counter()
            root = Path(tmp) / f"root-{n}"
            # in a process of its own: Linux children start with the parent's peak RSS (ru_maxrss survives fork and
            # exec), so the parent must never hold the rows
            subprocess.run([sys.executable, __file__, "--make-root", str(root), str(n)], check=True, cwd=REPO)
            print(f"{n} rows written in {time.perf_counter() - t0:.1f} s", flush=True)
            for fmt in ["baseline", *args.formats]:
                out = Path(tmp) / f"out-{n}.{fmt}"
                r = measure(root, fmt, out)
                shutil.rmtree(out) if out.is_dir() else out.unlink(missing_ok=True)
                r["rows_in_catalog"] = n
                results.append(r)
                print(f"{n:>9} {fmt:>9}: peak RSS {r['peak_rss_mb']:>6} MB  {r['wall_s']:>7} s  "
                      f"{r['file_mb']:>8} MB file", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
