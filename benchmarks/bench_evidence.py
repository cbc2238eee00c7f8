"""The evidence cross-match at scale: N candidates against a synthetic Gaia-like HATS catalog of M rows, on a
Dask LocalCluster, as a run does it (:func:`spec_vetting.evidence.crossmatch.match`: lsdb's k-d tree match within
the radius widened for proper motion, then per partition the propagation to each spectrum's epoch and the
nearest source within 1 arcsec).

The catalog is written once per size with lsdb (``from_dataframe`` + ``to_hats``, margin cache) under ``--root``
and reused. The candidates are catalog sources moved to epochs 2011-2021 (so every one has its source) plus 10 %
random positions (no source), spread over the same sky patch. Measured per size: the match's wall time, the CPU
seconds of the client and the workers (their processes' user + system time), and the peak RSS of the client and
of each worker (sampled every 50 ms); memory should follow the partitions, not the catalog's size.

    PYTHONPATH=$PWD python benchmarks/bench_evidence.py [--sizes 20000:200000,60000:600000,200000:2000000]
        [--workers 2] [--root /tmp/bench-evidence] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

#: the sky patch (deg): about 400 square degrees, so partitions are several and densities are survey-like
RA_RANGE, DEC_RANGE = (150.0, 170.0), (0.0, 20.0)


def catalog(root: Path, rows: int) -> Path:
    from spec_vetting.fixtures.hats import gaia_table, write_hats

    folder = root / f"gaia-{rows}"
    if (folder / "collection.properties").is_file():
        return folder
    t0 = time.perf_counter()
    write_hats(gaia_table(rows, seed=rows, ra_range=RA_RANGE, dec_range=DEC_RANGE), folder, "gaia",
               margin_arcsec=120.0, partition_rows=max(50_000, rows // 40))
    print(f"wrote {rows} rows in {time.perf_counter() - t0:.1f} s -> {folder}", flush=True)
    return folder


def candidates(cat_rows: int, n: int, seed: int = 1) -> pd.DataFrame:
    from spec_vetting.evidence.motion import propagate
    from spec_vetting.fixtures.hats import gaia_table

    rng = np.random.default_rng(seed)
    src = gaia_table(cat_rows, seed=cat_rows, ra_range=RA_RANGE, dec_range=DEC_RANGE)
    n_hit = int(n * 0.9)
    pick = src.iloc[rng.choice(len(src), n_hit, replace=False)]
    jyear = rng.uniform(2011.0, 2021.0, n)
    ra, dec = propagate(pick["ra"].to_numpy(), pick["dec"].to_numpy(), pick["pmra"].to_numpy(),
                        pick["pmdec"].to_numpy(), jyear[:n_hit] - 2016.0)
    miss_ra = rng.uniform(*RA_RANGE, n - n_hit)
    miss_dec = rng.uniform(*DEC_RANGE, n - n_hit)
    return pd.DataFrame({"key": np.arange(n, dtype=np.int64), "ra": np.concatenate([ra, miss_ra]),
                         "dec": np.concatenate([dec, miss_dec]), "jyear": jyear})


def _proc_stats(pids: list[int]) -> dict[int, tuple[float, int]]:
    import psutil

    out = {}
    for pid in pids:
        try:
            p = psutil.Process(pid)
            t = p.cpu_times()
            out[pid] = (t.user + t.system, p.memory_info().rss)
        except psutil.Error:
            continue
    return out


def measure(cat: Path, cands: pd.DataFrame, workers: int) -> dict:
    from distributed import Client, LocalCluster

    from spec_vetting.evidence.crossmatch import match, open_catalog
    from spec_vetting.evidence.sources import EvidenceSource

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        # imports and numba's first compilation are the workers' start-up, not the match: one tiny match first
        client.run(lambda: __import__("lsdb"))
        match(open_catalog(EvidenceSource(name="gaia", catalog=str(cat))), cands.iloc[:100])
        pids = [os.getpid(), *client.run(os.getpid).values()]
        peak = dict.fromkeys(pids, 0)
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for pid, (_, rss) in _proc_stats(pids).items():
                    peak[pid] = max(peak[pid], rss)
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        cpu0 = {pid: c for pid, (c, _) in _proc_stats(pids).items()}
        sampler.start()
        t0 = time.perf_counter()
        opened = open_catalog(EvidenceSource(name="gaia", catalog=str(cat)))
        found = match(opened, cands)
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
        cpu1 = {pid: c for pid, (c, _) in _proc_stats(pids).items()}
    cpu = {pid: cpu1.get(pid, 0.0) - cpu0.get(pid, 0.0) for pid in pids}
    return {"matched": int(len(found)), "wall_s": round(wall, 2),
            "cpu_s_client": round(cpu[pids[0]], 2), "cpu_s_workers": round(sum(cpu[p] for p in pids[1:]), 2),
            "peak_rss_mb_client": round(peak[pids[0]] / 2**20), "peak_rss_mb_worker_max":
                round(max(peak[p] for p in pids[1:]) / 2**20)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000:200000,60000:600000,200000:2000000",
                    help="candidates:catalog rows, comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--root", type=Path, default=Path("/tmp/bench-evidence"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    results = []
    for pair in args.sizes.split(","):
        n, m = (int(x) for x in pair.split(":"))
        cat = catalog(args.root, m)
        cands = candidates(m, n)
        r = {"candidates": n, "catalog_rows": m, **measure(cat, cands, args.workers)}
        r["ms_per_candidate"] = round(1000 * r["wall_s"] / n, 3)
        results.append(r)
        print(json.dumps(r), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
