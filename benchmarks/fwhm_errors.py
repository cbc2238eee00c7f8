"""The rules engine's line widths (FWHM) against the noise: reported error / scatter over noise draws.

Usage::

    PYTHONPATH=. python benchmarks/fwhm_errors.py [--draws 64] [--levels 10 5 3] [--real ../shared/data/real]

Real stars with Balmer absorption (``measure_wd``'s Hβ, Hγ, Hδ widths) are degraded to each S/N with
``synthetic.degrade`` (Gaussian noise, seeded), ``--draws`` times per level. Per star, line and S/N: how many draws
measured the width, the width of the file as observed and the median over the draws, the median and RMS reported
error, the scatter (standard deviation) of the measured widths over the draws and the ratio: the RMS error, times
``injected`` below, over the scatter (a draw's error describes that draw, so the widths of all draws spread as the
RMS of their errors). The oracle is the scatter over independent noise draws, never the code's own error formula.

The file's own noise is part of the total that the reported error describes, but it is the same in every draw, so
the scatter sees only the noise injected: the scatter is compared with the error times ``injected``, the fraction of
the noise's variance in the line's window that was injected (its square root, from the file's ivar and the level's
sigma alone). A level is shown only where ``injected`` is at least 0.8.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from spec_vetting.engines.rules.diagnostics import RestSpectrum  # noqa: E402
from spec_vetting.engines.rules.features import measure_wd  # noqa: E402
from spec_vetting.io import read_spectrum  # noqa: E402
from spec_vetting.synthetic.degrade import degrade, noise_sigma  # noqa: E402

#: (label, file under the real-data folder): the SDSS DA white dwarf (40-60 Å lines, S/N 40), LAMOST F5 (8 Å
#: lines, S/N 69), F0 (9-10 Å, S/N 34) and A1IV (20 Å, S/N 24) stars
STARS = (
    ("DA white dwarf", "sdss/spec-4455-55539-0692_wdtools_sample_spectrum.fits"),
    ("F5", "lamost/spec-57287-KP193637N444141V03_sp10-161.fits.gz"),
    ("F0", "lamost/sbc_27904160.fits"),
    ("A1IV", "lamost/spec-55862-B6212_sp06-044.fits"),
)
KEYS = ("fwhm_hb", "fwhm_hg", "fwhm_hd")


#: rest-frame (centre, half width) of the windows ``measure_wd`` reads each width in
WINDOWS = {"fwhm_hb": (4862.7, 120.0), "fwhm_hg": (4341.7, 110.0), "fwhm_hd": (4102.9, 70.0)}
MIN_INJECTED = 0.8


def injected(sp, key: str, snr: float) -> float:
    """Square root of the fraction of the noise variance in ``key``'s window that ``degrade`` injects at ``snr``."""
    centre, half = WINDOWS[key]
    wl = sp.wavelength / (1.0 + (sp.meta.redshift or 0.0))
    sel = sp.good & (np.abs(wl - centre) <= half)
    own = 1.0 / sp.ivar[sel]
    return float(np.sqrt(np.mean(np.clip(1.0 - own / noise_sigma(sp, snr) ** 2, 0.0, None))))


def run(sp, levels, draws: int, seed: int = 11, keys=KEYS) -> dict:
    """{(key, snr): (widths measured, errors reported)} over ``draws`` noise draws per level."""
    rng = np.random.default_rng(seed)
    out = {}
    for snr in levels:
        got = {k: ([], []) for k in keys}
        for _ in range(draws):
            d = degrade(sp, snr, rng)
            m = measure_wd(RestSpectrum.from_spectrum(d, d.meta.redshift))
            for k in keys:
                if m[k].ok:
                    got[k][0].append(m[k].value)
                    got[k][1].append(m[k].error)
        for k in keys:
            out[k, snr] = (np.asarray(got[k][0]), np.asarray(got[k][1]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=64)
    ap.add_argument("--levels", type=float, nargs="+", default=[10.0, 5.0, 3.0])
    ap.add_argument("--real", type=Path, default=REPO.parent / "shared" / "data" / "real")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print("| star | line | S/N | measured | width (observed) | median width | median error | RMS error | injected "
          "| scatter | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, path in STARS:
        sp = read_spectrum(args.real / path)
        full = measure_wd(RestSpectrum.from_spectrum(sp, sp.meta.redshift))
        res = run(sp, args.levels, args.draws)
        for k in KEYS:
            for snr in args.levels:
                f = injected(sp, k, snr)
                w, e = res[k, snr]
                if f < MIN_INJECTED or w.size < 3:
                    continue
                rms, sd = float(np.sqrt(np.mean(e**2))), float(np.std(w, ddof=1))
                print(f"| {label} | {k} | {snr:g} | {w.size}/{args.draws} | {full[k].value:.1f} | "
                      f"{np.median(w):.1f} | {np.median(e):.2f} | {rms:.2f} | {f:.2f} | {sd:.2f} "
                      f"| {rms * f / sd:.2f} |")
    print(f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
