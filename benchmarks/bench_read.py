"""Spectra read per second on one core, per layout, astropy back end vs fitsio back end, side by side.

    .venv/bin/python benchmarks/bench_read.py [--seconds 1.0] [--json out.json]

Reads the real files in ../shared/data/real (or tests/data/real when ../shared is absent), and for the layouts no
real file was found for (spSpec, SDSS-V) files written from a synthetic spectrum into a temporary folder. Each cell
repeats ``iter_spectra(path)`` (open, sniff, decode, checks; DESI: every usable target) for about ``--seconds`` and
reports spectra per CPU-second of the process (robust on a shared machine). Gzip files always go through astropy in
memory, so both columns measure the same path there.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as a Dask worker thread would see it

from spec_vetting.io import iter_spectra  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPEC_VETTING_SHARED", REPO.parent / "shared")) / "data" / "real"
LOCAL = REPO / "tests" / "data" / "real"

CASES = [  # (label, file under shared, file under tests/data/real or None)
    ("lamost-lrs-dr1-image", "lamost/spec-55862-B6212_sp06-006.fits", "spec-55862-B6212_sp06-006.fits"),
    ("lamost-lrs-image", "lamost/spec-58397-EG014118N254444M01_sp03-031.fits", None),
    ("lamost-lrs-image (gzip)", "lamost/sbc_101008.fits", "sbc_101008.fits"),
    ("lamost-lrs-coadd-table", "lamost/pylasp_3703110.fits", None),
    ("sdss-spec-lite", "sdss/spec-0907-52373-0419.fits", "spec-0907-52373-0419.fits"),
    ("sdss-spec-full (BOSS)", "sdss/spec-7339-57918-0737.fits", None),
    ("desi-coadd (5 fibres, 2 usable)", "desi/coadd-sv3-dark-26065.fits", "coadd-sv3-dark-26065.fits"),
    ("desi-coadd + redrock join", "desi/coadd-4-80613-thru20210324.fits", "coadd-4-80613-thru20210324.fits"),
    ("desi-spectra (compressed masks)", "desi/spectra-sv3-dark-26065.fits", None),
    ("desi-coadd trimmed (25 rows)", "desi/quasarnp_test_coadd.fits", None),
]
#: layouts no real file was found for: written by spec_vetting.synthetic.writers from a synthetic spectrum
WRITTEN = [("sdss-spspec (written)", "sdss-spspec", "spSpec-51630-0266-145.fit"),
           ("sdssv-spec (written)", "sdssv-spec", "spec-101077-59630-27021597848749000.fits")]


def written_files(folder: Path) -> list[tuple[str, Path]]:
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.synthetic.writers import native_grid, write_spectrum

    out = []
    for label, layout, name in WRITTEN:
        spectrum = make_spectrum("carbon", seed=1, wavelength=native_grid(layout))
        out.append((label, write_spectrum(spectrum, folder / name, layout)))
    return out


def rate(path: Path, backend: str, seconds: float) -> float:
    """Spectra per CPU-second of this process (CPU time, not wall time: the machine may be shared)."""
    sum(1 for _ in iter_spectra(path, backend=backend, on_skip=lambda s: None))  # warm-up: imports, caches
    n = 0
    start = time.process_time()
    while True:
        n += sum(1 for _ in iter_spectra(path, backend=backend, on_skip=lambda s: None))
        elapsed = time.process_time() - start
        if elapsed >= seconds:
            return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="time per cell")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args()
    rows = []
    print(f"{'layout':36s} {'astropy /s':>11s} {'fitsio /s':>10s} {'ratio':>6s}")
    tmp = tempfile.TemporaryDirectory()
    cases = [(label, SHARED / shared if (SHARED / shared).exists() else (LOCAL / local if local else None))
             for label, shared, local in CASES] + written_files(Path(tmp.name))
    for label, path in cases:
        if path is None or not path.exists():
            print(f"{label:36s} {'(file absent)':>29s}")
            continue
        a = rate(path, "astropy", args.seconds)
        f = rate(path, "fitsio", args.seconds)
        rows.append({"layout": label, "file": path.name, "astropy_per_s": round(a, 1), "fitsio_per_s": round(f, 1)})
        print(f"{label:36s} {a:11.1f} {f:10.1f} {f / a:6.2f}")
    tmp.cleanup()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
