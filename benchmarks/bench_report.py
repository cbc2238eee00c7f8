"""Review page at scale: build time, file sizes and how fast headless Chromium opens it.

    .venv/bin/python benchmarks/bench_report.py --n 3000 [--per-file 200] [--work /tmp/bench-report]

Builds a catalog of ``--n`` review-queue verdicts (UNDECIDED, p_yes 0.5) whose rows point at the real spectra of
../shared/data/real (LAMOST and SDSS files, round robin; every row its own candidate id), with real-looking
trajectories (4 zooms and an answer per candidate) and no PNG in the turn rows, as a catalog that stores pictures
by reference will have. Then ``write_pages(..., only_queue=True)`` and, in Chromium (``--headless --dump-dom``,
no virtual time), the time from navigation start to the end of the page's init (``data-init-ms``: data parsed,
list of the first 1000 rows and the first candidate's plot drawn) for index.html and the last part file, and the
wall time of the whole browser run against an empty page's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPEC_VETTING_SHARED", REPO.parent / "shared")) / "data" / "real"


def make_catalog(root: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(p for p in (SHARED / "lamost").glob("spec-*.fits*")) + sorted((SHARED / "sdss").glob("spec-*.fits"))
    if not files:
        raise SystemExit(f"no real spectra under {SHARED}")
    verdicts, turns = [], []
    windows = [[6450, 6800], [4250, 5060], [5800, 5960], [3700, 4000]]
    for i in range(n):
        cid = f"cand-{i:06d}"
        verdicts.append({"run_id": "bench", "candidate_id": cid, "verdict": "UNDECIDED", "status": "none",
                         "p_yes": 0.5, "p_yes_source": "logprobs", "justification": None, "reason": "budget",
                         "engine": "openai", "model": "Spec-o3-7B", "survey": "lamost",
                         "path": str(files[i % len(files)]), "target": None, "obsid": 100000000 + i,
                         "ra": 126.50239999999997 + i * 1e-3, "dec": -0.0001450149058217, "redshift": 1e-4})
        for t, (lo, hi) in enumerate(windows):
            call = {"name": "spectral_visualization_tool",
                    "arguments": {"label": "H\u03b1 region", "wavelength_range": [lo, hi]}}
            turns.append({"run_id": "bench", "candidate_id": cid, "turn": t,
                          "assistant_text": "<think>" + "The continuum and the lines look like this. " * 12 +
                                            "</think>\n<tool_call>\n" + json.dumps(call) + "\n</tool_call>",
                          "tool_call": json.dumps(call), "tool_response_text": f"Generated spectral visualization "
                          f"focused on wavelength range ({lo}, {hi}) \u00c5.", "zoom_min": float(lo),
                          "zoom_max": float(hi), "image_png": None})
        turns.append({"run_id": "bench", "candidate_id": cid, "turn": 4, "assistant_text": "<answer>\\boxed{NO}",
                      "tool_call": None, "tool_response_text": None, "zoom_min": None, "zoom_max": None,
                      "image_png": None})
    for name, rows in (("verdicts", verdicts), ("turns", turns)):
        folder = root / name / "run_date=2026-01-01" / "task=cv"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / "part-bench.parquet")
    (root / "_runs" / "bench").mkdir(parents=True, exist_ok=True)
    (root / "_runs" / "bench" / "manifest.json").write_text(json.dumps({"run_id": "bench", "run_date": "2026-01-01"}))
    (root / "_runs" / "LATEST").write_text("bench")


def chromium_open(page: Path, profile: Path) -> tuple[float, int | None]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-background-networking", f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    wall = time.perf_counter() - t0
    m = re.search(r'data-init-ms="(\d+)"', out)
    return wall, int(m.group(1)) if m else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--per-file", type=int, default=200)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-report-"))
    root = work / "cat"
    if root.exists():
        shutil.rmtree(root)
    make_catalog(root, args.n)
    from spec_vetting.catalog.run_data import read_run
    from spec_vetting.report.page import write_pages

    t0 = time.perf_counter()
    data = read_run(root)
    t1 = time.perf_counter()
    paths = write_pages(data, work / "out", only_queue=True, per_file=args.per_file)
    t2 = time.perf_counter()
    sizes = [p.stat().st_size for p in paths]
    empty = work / "empty.html"
    empty.write_text("<!DOCTYPE html><title>x</title><body data-init-ms=\"0\"></body>")
    base_wall, _ = chromium_open(empty, work / "profile-empty")
    first_wall, first_init = chromium_open(paths[0], work / "profile-a")
    last_wall, last_init = chromium_open(paths[-1], work / "profile-b")
    print(json.dumps({
        "n": args.n, "files": len(paths), "per_file": args.per_file, "read_s": round(t1 - t0, 2),
        "build_s": round(t2 - t1, 2), "index_mb": round(sizes[0] / 1e6, 2), "total_mb": round(sum(sizes) / 1e6, 1),
        "kb_per_candidate": round(sum(sizes) / args.n / 1e3, 1),
        "chromium_empty_page_s": round(base_wall, 2),
        "index": {"wall_s": round(first_wall, 2), "init_ms": first_init},
        "last_part": {"wall_s": round(last_wall, 2), "init_ms": last_init},
    }, indent=2))


if __name__ == "__main__":
    main()
