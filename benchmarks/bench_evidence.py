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

``--dense`` measures instead the dense-field case (:mod:`spec_vetting.synthetic.hard_field`: a catalog shaped like
the public Gaia DR3 one, 10" margin, 40,000 sources per square degree around a Barnard-like star, fast movers
across partition borders, candidates at SDSS and LAMOST epochs) in this one process, against plain astropy on the
same data (each catalog source moved to each spectrum epoch with ``apply_space_motion``, then
``match_to_catalog_sky`` for the nearest and ``search_around_sky`` for how many within 1"): CPU seconds of each
(``time.process_time``, all threads), lsdb's import and a small night's first match (50 candidates, the one-off
costs included) apart, and whether both found the same sources.

    PYTHONPATH=$PWD python benchmarks/bench_evidence.py --dense [--half-deg 0.25,0.5] [--root DIR] [--json F]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from cluster_meter import metered  # benchmarks/ (the script's folder)

#: the sky patch (deg): about 400 square degrees, so partitions are several and densities are survey-like
RA_RANGE, DEC_RANGE = (150.0, 170.0), (0.0, 20.0)


def catalog(root: Path, rows: int) -> Path:
    from spec_vetting.synthetic.hats import gaia_table, write_hats

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
    from spec_vetting.synthetic.hats import gaia_table

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


def measure(cat: Path, cands: pd.DataFrame, workers: int) -> dict:
    from distributed import Client, LocalCluster

    from spec_vetting.evidence.crossmatch import match, open_catalog
    from spec_vetting.evidence.sources import EvidenceSource

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        # imports and numba's first compilation are the workers' start-up, not the match: one tiny match first
        client.run(lambda: __import__("lsdb"))
        match(open_catalog(EvidenceSource(name="gaia", catalog=str(cat))), cands.iloc[:100])
        with metered(client) as cost:
            opened = open_catalog(EvidenceSource(name="gaia", catalog=str(cat)))
            found = match(opened, cands)
    return {"matched": int(len(found.frame)), "beyond_margin_cones": found.beyond_margin, **cost}


def _astropy_match(catalog: pd.DataFrame, cands: pd.DataFrame) -> dict[int, int]:
    """Plain astropy: per spectrum epoch, the whole catalog moved there, then the nearest within 1" (and the count
    within, as the match gives it). Returns candidate position -> source_id."""
    from astropy import units as u
    from astropy.coordinates import Distance, SkyCoord, search_around_sky
    from astropy.time import Time

    stars = SkyCoord(ra=catalog["ra"].to_numpy() * u.deg, dec=catalog["dec"].to_numpy() * u.deg,
                     pm_ra_cosdec=np.nan_to_num(catalog["pmra"].to_numpy()) * u.mas / u.yr,
                     pm_dec=np.nan_to_num(catalog["pmdec"].to_numpy()) * u.mas / u.yr,
                     distance=Distance(10.0, u.pc), radial_velocity=0 * u.km / u.s,
                     obstime=Time(2016.0, format="jyear"))
    ids = catalog["source_id"].to_numpy()
    out = {}
    for mjd, group in cands.groupby("mjd"):
        moved = stars.apply_space_motion(new_obstime=Time(mjd, format="mjd"))
        moved = SkyCoord(moved.ra, moved.dec)
        here = SkyCoord(group["ra"].to_numpy() * u.deg, group["dec"].to_numpy() * u.deg)
        idx, sep, _ = here.match_to_catalog_sky(moved)
        search_around_sky(here, moved, 1.0 * u.arcsec)
        for pos, i, d in zip(group.index, idx, sep.arcsec, strict=True):
            if d <= 1.0:
                out[int(pos)] = int(ids[i])
    return out


def dense(root: Path, half_deg: float) -> dict:
    """The dense-field case at one field size, in this process (see the module's doc)."""
    import warnings

    from spec_vetting.evidence.motion import mjd_to_jyear
    from spec_vetting.synthetic.hard_field import MARGIN_ARCSEC, hard_field
    from spec_vetting.synthetic.hats import write_hats

    n_cands = int(40_000 * (2 * half_deg) ** 2 * 0.8)
    catalog, cands = hard_field(0, n_field_candidates=n_cands, n_empty=n_cands // 10, field_half_deg=half_deg)
    folder = root / f"dense-{half_deg:g}"
    if not (folder / "collection.properties").is_file():
        write_hats(catalog, folder, "gaia", margin_arcsec=MARGIN_ARCSEC, partition_rows=5000, highest_order=10)
    frame = pd.DataFrame({"key": np.arange(len(cands)), "ra": cands["ra"].to_numpy(),
                          "dec": cands["dec"].to_numpy(), "jyear": mjd_to_jyear(cands["mjd"].to_numpy())})

    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        return out, round(time.perf_counter() - w, 2), round(time.process_time() - c, 2)

    warnings.simplefilter("ignore")
    _, import_wall, import_cpu = timed(lambda: __import__("lsdb"))
    from spec_vetting.evidence.crossmatch import match, open_catalog
    from spec_vetting.evidence.sources import EvidenceSource

    opened = open_catalog(EvidenceSource(name="gaia", catalog=str(folder)))
    _, small_wall, small_cpu = timed(lambda: match(opened, frame.sample(50, random_state=1)))
    ours, wall, cpu = timed(lambda: match(opened, frame))
    theirs, a_wall, a_cpu = timed(lambda: _astropy_match(catalog, cands))
    got = {int(k): int(v) for k, v in ours.frame["source_id"].items()}
    return {"field_half_deg": half_deg, "catalog_rows": len(catalog), "candidates": len(cands),
            "partitions": len(opened.catalog.get_healpix_pixels()), "matched": len(got),
            "same_as_astropy": got == theirs, "beyond_margin_cones": ours.beyond_margin,
            "lsdb_import_wall_s": import_wall, "lsdb_import_cpu_s": import_cpu,
            "small_night_50_wall_s": small_wall, "small_night_50_cpu_s": small_cpu,
            "match_wall_s": wall, "match_cpu_s": cpu, "astropy_wall_s": a_wall, "astropy_cpu_s": a_cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000:200000,60000:600000,200000:2000000",
                    help="candidates:catalog rows, comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--root", type=Path, default=Path("/tmp/bench-evidence"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--dense", action="store_true", help="the dense-field case against plain astropy instead")
    ap.add_argument("--half-deg", default="0.25,0.5", help="--dense: half-widths of the dense field (deg)")
    args = ap.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    results = []
    if args.dense:
        for half in (float(x) for x in args.half_deg.split(",")):
            results.append(dense(args.root, half))
            print(json.dumps(results[-1]), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
        return
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
