"""The rules engine's errors follow the data (issue 26, item 1).

Real spectra are degraded with Gaussian noise to S/N 50, 10, 5, 3 and 2 (``fixtures.degrade``); the oracle is
the noise injected: the reported error must grow about as 1/(S/N), as the injected noise does, and must match the
scatter of the same measurement over independent noise draws (not the code's own error formula). Every kind of
feature is covered: EWs, band depths and continuum slopes (errors propagated analytically from ivar) and line
widths (FWHM, error from a noise bootstrap: within 20 % of the scatter at S/N 10, 5 and 3 where claimed). A level
is used only where the file's own noise is well below the injected one, so that the noise at that level is the
injected noise.
"""

from __future__ import annotations

import numpy as np
import pytest

from spec_vetting.engines.rules.diagnostics import RestSpectrum
from spec_vetting.engines.rules.features import measure_gm, measure_wd
from spec_vetting.synthetic.degrade import degrade

pytestmark = pytest.mark.real_data

LEVELS = (50.0, 10.0, 5.0, 3.0, 2.0)
DRAWS = 32

#: (file, measure, keys measured on it): an F5 star (S/N 99, 69 in the blue) and a G3 star (S/N 199, 102 in the
#: blue) from LAMOST; the F5 star is degraded from S/N 10 down, the G3 star from S/N 50
ANALYTIC = (
    ("lamost/spec-57287-KP193637N444141V03_sp10-161.fits.gz", measure_wd, ("ew_hb", "ew_hg", "slope")),
    ("lamost/spec-58397-EG014118N254444M01_sp03-031.fits", measure_gm,
     ("tio_7054", "cah_6830", "ew_nai", "ew_cat", "slope")),
)


def _runs(sp, measure, keys, levels, seed=11, draws=DRAWS):
    """Per level: (values over draws, reported errors over draws) of each key."""
    out = {}
    rng = np.random.default_rng(seed)
    for snr in levels:
        vals = {k: [] for k in keys}
        errs = {k: [] for k in keys}
        for _ in range(draws):
            d = degrade(sp, snr, rng)
            m = measure(RestSpectrum.from_spectrum(d, d.meta.redshift))
            for k in keys:
                if m[k].ok:
                    vals[k].append(m[k].value)
                    errs[k].append(m[k].error)
        out[snr] = (vals, errs)
    return out


def _own_snr(sp) -> float:
    """The file's own per-pixel S/N: the lower of its median and its median blueward of 5000 Å."""
    g = sp.good
    snr = sp.flux[g] * np.sqrt(sp.ivar[g])
    return float(min(np.median(snr), np.median(snr[sp.wavelength[g] < 5000.0])))


@pytest.mark.parametrize("path,measure,keys", ANALYTIC, ids=["F5-EWs-slope", "G3-bands-EWs-slope"])
def test_analytic_errors_grow_as_one_over_snr_and_match_the_scatter(real_dir, path, measure, keys):
    from spec_vetting.io import read_spectrum

    sp = read_spectrum(real_dir / path)
    levels = [s for s in LEVELS if s <= _own_snr(sp) / 1.9]
    assert levels[-1] == 2.0 and len(levels) >= 4
    runs = _runs(sp, measure, keys, levels)
    for k in keys:
        scaled, ratios = [], []
        for snr in levels:
            vals, errs = runs[snr]
            assert len(vals[k]) == DRAWS, (k, snr)
            err = float(np.median(errs[k]))
            scaled.append(err * snr)  # constant if the error goes as 1/(S/N)
            ratios.append(err / float(np.std(vals[k], ddof=1)))  # reported error / scatter over draws
        assert max(scaled) / min(scaled) < 1.5, (k, dict(zip(levels, scaled, strict=True)))
        # 32 draws give the scatter to about ±13 %; band depths at S/N 2 are a little non-linear
        assert all(0.6 < r < 1.6 for r in ratios), (k, dict(zip(levels, ratios, strict=True)))


def test_fwhm_error_is_not_the_pixel_width_and_grows_with_the_noise(real_dir):
    """FWHM of the F5 star's narrow Balmer lines (8 Å) at S/N 50, 20, 10: error about 1/(S/N) and near the
    scatter (the 20 % claims are in the test below)."""
    from spec_vetting.io import read_spectrum

    sp = read_spectrum(real_dir / "lamost/spec-57287-KP193637N444141V03_sp10-161.fits.gz")
    keys = ("fwhm_hb", "fwhm_hg")
    runs = _runs(sp, measure_wd, keys, (50.0, 20.0, 10.0))
    for k in keys:
        errs = {snr: float(np.median(runs[snr][1][k])) for snr in runs}
        scaled = [err * snr for snr, err in errs.items()]
        assert max(scaled) / min(scaled) < 2.0, (k, errs)
        for snr, (vals, e) in runs.items():
            assert len(vals[k]) == DRAWS, (k, snr)
            ratio = float(np.median(e[k])) / float(np.std(vals[k], ddof=1))
            assert 0.5 < ratio < 2.2, (k, snr, ratio)


def test_broad_line_fwhm_errors_grow_with_the_noise_down_to_snr_2(real_dir):
    """The SDSS white dwarf's broad Balmer lines (S/N 40 as observed) at S/N 10, 5, 3, 2: the FWHM is measured in
    every draw and its error grows as the noise does."""
    from spec_vetting.io import read_spectrum

    sp = read_spectrum(real_dir / "sdss/spec-4455-55539-0692_wdtools_sample_spectrum.fits")
    keys = ("fwhm_hb", "fwhm_hg", "fwhm_hd")
    levels = (10.0, 5.0, 3.0, 2.0)
    runs = _runs(sp, measure_wd, keys, levels)
    for k in keys:
        errs = [float(np.median(runs[snr][1][k])) for snr in levels]
        assert errs[-1] > 2.5 * errs[0], (k, errs)
        for snr in levels:
            assert len(runs[snr][0][k]) == DRAWS, (k, snr)


#: noise draws per level for the FWHM claims: the scatter of 128 draws is known to about ±6 %
FWHM_DRAWS_TEST = 128

#: (file, {S/N: widths}): the lines whose FWHM error is claimed to be the scatter within 20 %, where the file's own
#: noise is under a fifth of the variance in the line's window (``_injected`` >= 0.9) and the line is measured in
#: most draws; benchmarks/fwhm_errors.py prints every star, line and level, claimed or not. Not claimed: the F5
#: star's 8 Å lines at S/N 5 (the width is biased up to 12-21 Å by the extra smoothing and its spread is
#: heavy-tailed: error / scatter 1.0-1.4 from one seed to the next); the A1IV star's Hβ at S/N 3 (1.1 on average,
#: up to 1.26 with some seeds)
FWHM_CLAIMS = (
    ("sdss/spec-4455-55539-0692_wdtools_sample_spectrum.fits",
     {10.0: ("fwhm_hb",), 5.0: ("fwhm_hb", "fwhm_hg", "fwhm_hd"), 3.0: ("fwhm_hb", "fwhm_hg", "fwhm_hd")}),
    ("lamost/spec-57287-KP193637N444141V03_sp10-161.fits.gz",
     {10.0: ("fwhm_hb", "fwhm_hg", "fwhm_hd")}),
    ("lamost/sbc_27904160.fits", {10.0: ("fwhm_hb", "fwhm_hg"), 5.0: ("fwhm_hb", "fwhm_hg")}),
    ("lamost/spec-55862-B6212_sp06-044.fits", {3.0: ("fwhm_hg",)}),
)
_WINDOWS = {"fwhm_hb": (4862.7, 120.0), "fwhm_hg": (4341.7, 110.0), "fwhm_hd": (4102.9, 70.0)}


def _injected(sp, key: str, snr: float) -> float:
    """Square root of the share of the noise variance in ``key``'s window that ``degrade`` injects at ``snr``:
    the file's own noise is the same in every draw, so the scatter over draws sees only the rest."""
    from spec_vetting.synthetic.degrade import noise_sigma

    centre, half = _WINDOWS[key]
    wl = sp.wavelength / (1.0 + (sp.meta.redshift or 0.0))
    sel = sp.good & (np.abs(wl - centre) <= half)
    share = 1.0 - (1.0 / sp.ivar[sel]) / noise_sigma(sp, snr) ** 2
    return float(np.sqrt(np.mean(np.clip(share, 0.0, None))))


@pytest.mark.parametrize("path,claims", FWHM_CLAIMS, ids=["DA-white-dwarf", "F5", "F0", "A1IV"])
def test_fwhm_error_is_the_scatter_over_noise_draws_within_20_percent(real_dir, path, claims):
    """Reported FWHM error against the scatter (standard deviation) of the width over 128 independent noise
    draws, among the draws where the width is measured (at least 85 % of them). A draw's error describes that
    draw (a line that came out fainter gets more smoothing and a larger error), so the widths of all draws spread
    as the RMS of their errors: that is what is compared, times the injected share of the noise."""
    from spec_vetting.io import read_spectrum

    sp = read_spectrum(real_dir / path)
    every_key = sorted({k for keys in claims.values() for k in keys})
    runs = _runs(sp, measure_wd, every_key, list(claims), seed=2026, draws=FWHM_DRAWS_TEST)
    for snr, keys in claims.items():
        vals, errs = runs[snr]
        for k in keys:
            injected = _injected(sp, k, snr)
            assert injected >= 0.9, (k, snr, injected)
            assert len(vals[k]) >= 0.85 * FWHM_DRAWS_TEST, (k, snr, len(vals[k]))
            rms = float(np.sqrt(np.mean(np.square(errs[k]))))
            ratio = rms * injected / float(np.std(vals[k], ddof=1))
            assert 0.8 <= ratio <= 1.2, (k, snr, ratio)
