"""Light-curve evidence at scale (issue 38): N candidates matched against a synthetic ZTF-like light-curve HATS
catalog of M objects with about E epochs each, and every matched band summarised, as a run does it
(:func:`spec_vetting.evidence.lightcurve_match.match_light_curves` on a Dask LocalCluster).

The catalog (ZTF DR columns: one row per object and filter, nested ``lightcurve`` with hmjd/mag/magerr/catflags)
is written once per size with nested-pandas + lsdb (``from_dataframe`` + ``to_hats``, 10" margin) under ``--root``
and reused; its objects are steady stars with 3 % of Mira-like and 2 % of outbursting curves, 2 % of epochs
flagged. The candidates are 90 % catalog objects (so each matches its g and r rows) and 10 % random positions, on
the same sky patch. Measured: wall time, CPU seconds of the client and of the workers (user + system of their
processes), peak RSS of the client and of each worker (sampled every 50 ms), after one small warm-up match. As in
a run, the workers write the good epochs (the review page's points) to files beside the catalog and return only
the summaries.

    PYTHONPATH=$PWD python benchmarks/bench_lightcurves.py --sizes 2000:20000:300,5000:50000:300 \
        [--workers 2] [--partition-rows 5000] [--root /tmp/bench-lightcurves] [--json out.json]

(``--sizes`` is candidates:objects:epochs, comma-separated; objects count object-filter rows, as ZTF DR's do.)
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
from cluster_meter import metered  # benchmarks/ (the script's folder)

#: the sky patch (deg): 4 square degrees, so that tens of thousands of rows reach ZTF-like densities
RA_RANGE, DEC_RANGE = (150.0, 152.0), (10.0, 12.0)


def object_positions(objects: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the objects: pairs of g and r rows at one position (ZTF DR has one row per filter)."""
    rng = np.random.default_rng(objects)
    n_pos = (objects + 1) // 2
    ra = np.repeat(rng.uniform(*RA_RANGE, n_pos), 2)[:objects]
    dec = np.repeat(rng.uniform(*DEC_RANGE, n_pos), 2)[:objects]
    return ra, dec


def catalog(root: Path, objects: int, epochs: int, partition_rows: int) -> Path:
    import nested_pandas as npd

    from spec_vetting.synthetic.lightcurves import ZTF_START_MJD, write_light_curves

    folder = root / f"ztf-{objects}x{epochs}-p{partition_rows}"
    if (folder / "collection.properties").is_file():
        return folder
    t0 = time.perf_counter()
    rng = np.random.default_rng([objects, epochs])
    ra, dec = object_positions(objects)
    n_ep = rng.integers(int(epochs * 0.7), int(epochs * 1.3) + 1, objects)
    total = int(n_ep.sum())
    owner = np.repeat(np.arange(objects), n_ep)
    t = ZTF_START_MJD + rng.uniform(0, 1800, total)
    m0 = rng.uniform(14.0, 20.0, objects)
    err = 0.01 + 0.02 * np.exp(m0 - 18.0)
    kind = rng.random(objects)
    mag = m0[owner].copy()
    mira = (kind < 0.03)[owner]
    mag[mira] += 1.2 * np.sin(2 * np.pi * t[mira] / 330.0)
    burst = ((kind >= 0.03) & (kind < 0.05))[owner] & (rng.random(total) < 0.03)
    mag[burst] -= 3.0
    e = err[owner]
    mag += rng.normal(0, 1, total) * e
    flags = np.where(rng.random(total) < 0.02, 32768, 0).astype(np.int64)
    obj = pd.DataFrame({"objectid": np.arange(objects, dtype=np.int64), "objra": ra, "objdec": dec,
                        "filterid": np.where(np.arange(objects) % 2 == 0, 1, 2).astype(np.int64)})
    det = pd.DataFrame({"hmjd": t, "mag": mag, "magerr": e, "catflags": flags}, index=owner)
    table = npd.NestedFrame(obj).join_nested(det, "lightcurve")
    write_light_curves(table, folder, "ztf_bench", margin_arcsec=10.0, partition_rows=partition_rows)
    print(f"wrote {objects} objects x ~{epochs} epochs ({total} epochs) in {time.perf_counter() - t0:.1f} s "
          f"-> {folder}", flush=True)
    return folder


def candidates(objects: int, n: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ra, dec = object_positions(objects)
    n_hit = int(n * 0.9)
    pick = rng.choice(np.arange(0, objects, 2), n_hit, replace=n_hit > (objects + 1) // 2)
    return pd.DataFrame({"key": np.arange(n, dtype=np.int64),
                         "ra": np.concatenate([ra[pick], rng.uniform(*RA_RANGE, n - n_hit)]),
                         "dec": np.concatenate([dec[pick], rng.uniform(*DEC_RANGE, n - n_hit)])})


def measure(cat: Path, cands: pd.DataFrame, workers: int) -> dict:
    from distributed import Client, LocalCluster

    from spec_vetting.evidence.lightcurve_match import match_light_curves, open_light_curves
    from spec_vetting.evidence.sources import EvidenceSource

    source = EvidenceSource(name="ztf", catalog=str(cat))
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("lsdb"))
        match_light_curves(open_light_curves(source), cands.iloc[:50])  # imports, first compilation
        with metered(client) as cost:
            # as a run does it: the workers write the good epochs beside the cache, the client gets the summaries
            points = cat.parent / f"points-{cat.name}-{len(cands)}"
            shutil.rmtree(points, ignore_errors=True)
            found = match_light_curves(open_light_curves(source), cands.assign(cid=cands["key"].astype(str)),
                                       points_dir=points, run_id="bench")
    summarised = sum(1 for v in found.values() if v["record"].get("ztf_r_median_mag") is not None)
    return {"matched": len(found), "r_band_summaries": summarised, **cost}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000:20000:300,5000:50000:300", help="candidates:objects:epochs, ...")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partition-rows", type=int, default=5000, help="catalog objects per HATS partition")
    ap.add_argument("--root", type=Path, default=Path("/tmp/bench-lightcurves"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    results = []
    for triple in args.sizes.split(","):
        n, m, e = (int(x) for x in triple.split(":"))
        cat = catalog(args.root, m, e, args.partition_rows)
        r = {"candidates": n, "objects": m, "epochs": e, **measure(cat, candidates(m, n), args.workers)}
        r["cpu_ms_per_candidate"] = round(1000 * (r["cpu_s_client"] + r["cpu_s_workers"]) / n, 3)
        results.append(r)
        print(json.dumps(r), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
