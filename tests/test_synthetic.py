"""Synthetic spectra: deterministic per seed, each kind carries its defining features, noise matches ivar."""

from __future__ import annotations

import re

import numpy as np
import pytest

from spec_vetting.synthetic.grids import LAMOST_NPIX, lamost_grid
from spec_vetting.synthetic.synthetic import KINDS, TASK_CONFUSERS, TASK_POSITIVES, make_spectrum

SEEDS = range(6)


def _sel(s, lo, hi):
    w = s.wavelength
    g = s.good & (w >= lo) & (w <= hi)
    return w[g], s.flux[g]


def level(s, lo, hi) -> float:
    return float(np.median(_sel(s, lo, hi)[1]))


def ratio(s, inside, outside) -> float:
    """Median flux inside a band over median flux beside it (< 1 = absorption)."""
    return level(s, *inside) / level(s, *outside)


def ew(s, center, half, gap) -> float:
    """Equivalent width (Å) against a straight continuum from two side windows: > 0 absorption, < 0 emission."""
    wl, fl = _sel(s, center - half - gap - 40, center - half - gap)
    wr, fr = _sel(s, center + half + gap, center + half + gap + 40)
    a, b = np.polyfit(np.concatenate([wl, wr]), np.concatenate([fl, fr]), 1)
    w, f = _sel(s, center - half, center + half)
    return float(np.sum((1 - f / (a * w + b)) * np.gradient(w)))


def rest(kind, seed, **kw):
    return make_spectrum(kind, seed=seed, snr=80, **kw).rest_frame()


def test_task_tables_are_consistent():
    assert set(TASK_POSITIVES) == set(TASK_CONFUSERS) == {"cv", "carbon", "ss", "gm", "wd"}
    for task in TASK_POSITIVES:
        assert set(TASK_POSITIVES[task]) <= set(KINDS)
        assert set(TASK_CONFUSERS[task]) <= set(KINDS)
        assert not set(TASK_POSITIVES[task]) & set(TASK_CONFUSERS[task])
    assert TASK_POSITIVES["cv"] == ["cv", "cv_outburst"] and TASK_POSITIVES["wd"] == ["wd_da", "wd_db"]
    assert TASK_CONFUSERS["cv"] == ["qso", "galaxy", "a_star", "wd_da"]


def test_default_grid_is_lamost_log_linear():
    w = lamost_grid()
    assert w.size == LAMOST_NPIX == 3909
    assert w[0] == pytest.approx(10**3.5682)
    assert np.allclose(np.diff(np.log10(w)), 1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_deterministic_and_well_formed(kind):
    a = make_spectrum(kind, seed=7)
    b = make_spectrum(kind, seed=7)
    c = make_spectrum(kind, seed=8)
    assert np.array_equal(a.flux, b.flux) and np.array_equal(a.ivar, b.ivar) and np.array_equal(a.mask, b.mask)
    assert a.meta == b.meta
    assert not np.array_equal(a.flux, c.flux)
    assert len(a) == 3909 and np.all(np.isfinite(a.flux)) and np.all(a.ivar >= 0)
    assert a.mask.any(), "a few bad pixels are expected"
    assert np.all(a.ivar[a.mask] == 0) and np.all(a.ivar[~a.mask] > 0)
    assert a.meta.survey == "lamost" and a.meta.variant == "synthetic"
    assert set(a.meta.ids) == {"obsid", "designation", "planid", "lmjd", "spid", "fiberid"}
    assert re.fullmatch(r"LAMOST J\d{6}\.\d{2}[+-]\d{6}\.\d", a.meta.ids["designation"])
    assert a.meta.pipeline_class in ("STAR", "GALAXY", "QSO")
    assert a.meta.snr == pytest.approx(30.0, rel=0.1)
    assert 0 <= a.meta.ra < 360 and -90 <= a.meta.dec <= 90


def test_ivar_matches_the_noise():
    # the same seed draws the same model and the same unit normals; only the scale follows snr
    noisy = make_spectrum("g_star", seed=3, snr=20)
    clean = make_spectrum("g_star", seed=3, snr=1e6)
    g = noisy.good & clean.good
    pulls = (noisy.flux[g] - clean.flux[g]) * np.sqrt(noisy.ivar[g])
    assert np.std(pulls) == pytest.approx(1.0, abs=0.05)
    assert noisy.meta.snr == pytest.approx(20.0, rel=0.05)


def test_custom_grid_and_bad_arguments():
    grid = 3600.0 + 0.8 * np.arange(7781)
    s = make_spectrum("qso", seed=1, wavelength=grid, redshift=1.2)
    assert np.array_equal(s.wavelength, grid) and s.meta.redshift == 1.2
    with pytest.raises(ValueError, match="unknown synthetic kind"):
        make_spectrum("pulsar", seed=1)
    with pytest.raises(ValueError, match="strictly increasing"):
        make_spectrum("cv", seed=1, wavelength=grid[::-1])
    with pytest.raises(ValueError, match="snr"):
        make_spectrum("cv", seed=1, snr=0)


def test_redshift_ranges():
    for seed in SEEDS:
        assert 0.3 <= make_spectrum("qso", seed=seed).meta.redshift <= 2.0 + 1e-3
        assert 0.05 <= make_spectrum("galaxy", seed=seed).meta.redshift <= 0.3 + 1e-3
        assert abs(make_spectrum("k_star", seed=seed).meta.redshift) < 0.002


# --- defining features, measured in the rest frame on every seed -------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_cv_shows_balmer_emission_and_outburst_does_not(seed):
    assert ew(rest("cv", seed), 6564.6, 40, 30) < -5
    outburst = rest("cv_outburst", seed)
    assert ew(outburst, 6564.6, 40, 30) > -5
    assert ratio(outburst, (4200, 4400), (7000, 7500)) > 2  # strong blue continuum


@pytest.mark.parametrize("seed", SEEDS)
def test_carbon_has_swan_bands_and_no_tio(seed):
    s = rest("carbon", seed)
    assert ratio(s, (5100, 5160), (5170, 5230)) < 0.8  # C2 5165 head, degrading blueward
    assert ratio(s, (7060, 7110), (6990, 7045)) > 0.97  # no TiO 7054


@pytest.mark.parametrize("seed", SEEDS)
def test_s_star_zro_and_weaker_tio_than_giants(seed):
    s, giant, carbon = rest("s_star", seed), rest("m_giant", seed), rest("carbon", seed)
    assert ratio(s, (6480, 6530), (6420, 6468)) < 0.9  # ZrO 6474
    assert ratio(giant, (6480, 6530), (6420, 6468)) > 0.98
    assert ratio(carbon, (6480, 6530), (6420, 6468)) > 0.98


def test_s_star_tio_weaker_than_m_giant_on_average():
    s = np.mean([ratio(rest("s_star", k), (7060, 7110), (6990, 7045)) for k in SEEDS])
    g = np.mean([ratio(rest("m_giant", k), (7060, 7110), (6990, 7045)) for k in SEEDS])
    assert s > g


@pytest.mark.parametrize("seed", SEEDS)
def test_m_giant_vs_m_dwarf_gravity_features(seed):
    giant, dwarf = rest("m_giant", seed), rest("m_dwarf", seed)
    assert ratio(giant, (7060, 7110), (6990, 7045)) < 0.95  # TiO 7054
    assert ew(dwarf, 8191, 12, 10) > 3 and ew(giant, 8191, 12, 10) < 2  # Na I 8183/8195
    assert ratio(dwarf, (6370, 6395), (6320, 6345)) < 0.8  # CaH 6382
    assert ratio(giant, (6370, 6395), (6320, 6345)) > 0.9


@pytest.mark.parametrize("seed", SEEDS)
def test_white_dwarfs(seed):
    da, db = rest("wd_da", seed), rest("wd_db", seed)
    assert ew(da, 4862.7, 80, 40) > 10  # pressure-broadened H beta
    assert ew(db, 5877.2, 30, 30) > 3  # He I 5876 absorption
    assert abs(ew(db, 4862.7, 25, 60)) < 2  # no hydrogen


def test_wd_balmer_lines_are_broader_than_a_star_lines():
    wide = lambda s: ew(s, 4862.7, 80, 40) - ew(s, 4862.7, 20, 100)  # noqa: E731 - absorption beyond +-20 Å
    assert np.mean([wide(rest("wd_da", k)) for k in SEEDS]) > 2 * np.mean([wide(rest("a_star", k)) for k in SEEDS])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_star_balmer_and_cool_star_metals(seed):
    assert ew(rest("a_star", seed), 4862.7, 25, 60) > 4
    for kind in ("g_star", "k_star", "galaxy"):
        assert ratio(rest(kind, seed), (3928, 3940), (3990, 4020)) < 0.8  # Ca II K


@pytest.mark.parametrize("seed", SEEDS)
def test_qso_broad_emission(seed):
    s = rest("qso", seed, redshift=1.0)
    assert ew(s, 2799.1, 60, 40) < -10  # Mg II, broad
