"""The rules engine's measurements on arrays whose answer is known analytically."""

from __future__ import annotations

import numpy as np
import pytest

from spec_vetting.engines.rules.diagnostics import (
    RestSpectrum,
    band_depth,
    continuum_slope,
    double_peak_separation,
    emission_line_ratio,
    equivalent_width,
    line_fwhm,
    snr_per_angstrom,
    window_flux,
)
from spec_vetting.engines.rules.tasks import RULES_TASKS, rules_task

WL = np.arange(3700.0, 9100.0, 1.0)


def gauss(center, fwhm, area):
    sigma = fwhm / 2.3548
    return area * np.exp(-0.5 * ((WL - center) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))


def rest(flux, ivar=None, mask=None, z=0.0, wl=WL):
    return RestSpectrum.from_arrays(wl, flux, np.full(wl.shape, 1e6) if ivar is None else ivar, mask, z)


def test_equivalent_width_sign_and_size():
    # an emission line of EW 30 Å on a flat continuum of 1: EW = -30 (emission negative)
    rs = rest(1.0 + gauss(6564.6, 20.0, 30.0))
    m = equivalent_width(rs, (6520, 6610), ((6450, 6500), (6630, 6680)))
    assert m.ok and m.value == pytest.approx(-30.0, abs=0.3)
    # the same line in absorption: positive
    rs = rest(1.0 - gauss(6564.6, 20.0, 10.0))
    assert equivalent_width(rs, (6520, 6610), ((6450, 6500), (6630, 6680))).value == pytest.approx(10.0, abs=0.2)


def test_equivalent_width_error_follows_ivar():
    flux = 1.0 + gauss(6564.6, 20.0, 30.0)
    lo = equivalent_width(rest(flux, ivar=np.full(WL.shape, 100.0)), (6520, 6610), ((6450, 6500), (6630, 6680)))
    hi = equivalent_width(rest(flux, ivar=np.full(WL.shape, 10000.0)), (6520, 6610), ((6450, 6500), (6630, 6680)))
    assert lo.error == pytest.approx(10 * hi.error, rel=1e-6)


def test_redshift_moves_to_rest_frame():
    z = 0.2
    rs = rest(1.0 + gauss(6564.6 * (1 + z), 20.0, 30.0), wl=WL, z=z)
    assert rs.redshift == z
    m = equivalent_width(rs, (6520, 6610), ((6450, 6500), (6630, 6680)))
    # observed-frame EW is (1+z) times the rest-frame one, and the window is read in the rest frame
    assert m.value == pytest.approx(-30.0 / (1 + z), abs=0.3)


def test_band_depth_of_a_step():
    flux = np.where((WL > 5120) & (WL < 5165), 0.6, 1.0)
    m = band_depth(rest(flux), (5125, 5163), ((5170, 5200),))
    assert m.value == pytest.approx(0.4, abs=1e-9)


def test_fwhm_of_gaussian_emission_and_absorption():
    rs = rest(1.0 + gauss(6564.6, 30.0, 60.0))
    m = line_fwhm(rs, 6564.6, 60.0, ((6450, 6500), (6630, 6680)), emission=True, smooth_a=1.0)
    assert m.value == pytest.approx(30.0, rel=0.05)
    rs = rest(1.0 - gauss(4862.7, 50.0, 20.0))
    m = line_fwhm(rs, 4862.7, 120.0, ((4700, 4740), (5010, 5050)), emission=False, smooth_a=1.0)
    assert m.value == pytest.approx(50.0, rel=0.05) and m.unit == "Å"


def test_fwhm_wider_than_window_is_a_lower_limit():
    rs = rest(1.0 - 0.5 * np.exp(-0.5 * ((WL - 4862.7) / 200.0) ** 2))
    m = line_fwhm(rs, 4862.7, 50.0, ((4700, 4740), (5010, 5050)), emission=False)
    assert m.ok and m.unit == "Å (lower limit)" and m.value == pytest.approx(100.0, abs=2.0)


def test_fwhm_not_measurable_without_a_line():
    rs = rest(np.ones(WL.shape), ivar=np.full(WL.shape, 100.0))
    m = line_fwhm(rs, 6564.6, 60.0, ((6450, 6500), (6630, 6680)), emission=True)
    assert not m.ok and "without significant emission" in m.why


def test_double_peak_separation():
    c = 6564.6
    dv = 800.0 / 299792.458 * c / 2
    rs = rest(1.0 + gauss(c - dv, 8.0, 15.0) + gauss(c + dv, 8.0, 15.0))
    m = double_peak_separation(rs, c, 40.0, ((6450, 6500), (6630, 6680)), smooth_a=1.0)
    assert m.value == pytest.approx(800.0, rel=0.1)
    single = double_peak_separation(rest(1.0 + gauss(c, 20.0, 30.0)), c, 40.0, ((6450, 6500), (6630, 6680)))
    assert single.value == 0.0


def test_continuum_slope_of_a_power_law():
    rs = rest((WL / 5000.0) ** -2.5)
    m = continuum_slope(rs, (4560, 4640), (7450, 7550))
    assert m.value == pytest.approx(-2.5, abs=0.01)


def test_masked_window_is_not_measurable_and_says_why():
    mask = (WL > 6500) & (WL < 6600)
    rs = rest(np.ones(WL.shape), mask=mask)
    m = equivalent_width(rs, (6540, 6590), ((6450, 6500), (6630, 6680)), "EW(Hα)")
    assert not m.ok and "masked" in m.why and "6540-6590" in m.why
    assert "not measurable" in m.fmt()
    # ivar = 0 is as bad as a mask
    ivar = np.where(mask, 0.0, 1.0)
    assert not equivalent_width(rest(np.ones(WL.shape), ivar=ivar), (6540, 6590), ((6450, 6500),)).ok


def test_window_outside_coverage_is_not_measurable():
    wl = np.arange(3800.0, 6000.0, 1.0)
    rs = rest(np.ones(wl.shape), wl=wl)
    m = window_flux(rs, 6500, 6600)
    assert not m.ok and "outside the rest-frame coverage" in m.why
    # half outside: too little of the window is covered
    assert not window_flux(rs, 5950, 6100).ok


def test_non_finite_flux_is_ignored():
    flux = np.ones(WL.shape)
    flux[::7] = np.nan
    m = window_flux(rest(flux), 5000, 5100)
    assert m.value == pytest.approx(1.0)


def test_snr_per_angstrom():
    ivar = np.full(WL.shape, 400.0)  # sigma 0.05 on flux 1: S/N 20 per 1 Å pixel
    assert snr_per_angstrom(rest(np.ones(WL.shape), ivar=ivar), 5000, 5100).value == pytest.approx(20.0)


def test_feature_sets_cover_the_five_tasks_and_aliases():
    assert set(RULES_TASKS) == {"cv", "carbon", "ss", "gm", "wd"}
    assert rules_task("cc").task == "carbon" and rules_task("CV").task == "cv"
    assert rules_task("quasar") is None
    rs = rest(np.ones(WL.shape), ivar=np.full(WL.shape, 100.0))
    for fs in RULES_TASKS.values():
        ms = fs.measure(rs)
        assert ms and all(m.windows for m in ms.values())
        assert 1 <= len(fs.zooms) <= 4


def test_balmer_decrement_is_the_ratio_of_line_fluxes():
    ha, hb = ((6540, 6590), ((6480, 6525), (6610, 6650))), ((4842, 4884), ((4800, 4830), (4895, 4925)))
    rs = rest(1.0 + gauss(6564.6, 10.0, 30.0) + gauss(4862.7, 10.0, 10.0))
    m = emission_line_ratio(rs, ha, hb, "decrement")
    assert m.ok and m.value == pytest.approx(3.0, rel=0.02) and m.error > 0
    # Hβ absent: a ratio of noise says nothing
    flat_hb = rest(1.0 + gauss(6564.6, 10.0, 30.0), ivar=np.full(WL.shape, 100.0))
    m = emission_line_ratio(flat_hb, ha, hb, "decrement")
    assert not m.ok and "both lines in emission" in m.why


def test_every_feature_set_measures_what_the_issue_lists():
    """The diagnostics an expert checks per task, by the names the engine cites them under."""
    required = {
        "cv": ["EW(Hα)", "EW(Hβ)", "EW(Hγ)", "FWHM(Hα)", "FWHM(Hβ)", "FWHM(Hγ)", "EW(He I 5876)", "EW(He II 4686)",
               "Balmer decrement", "continuum slope", "peak separation"],
        "carbon": ["C2 4737", "C2 5165", "C2 5636", "CN 4216", "TiO 7054"],
        "ss": ["ZrO 4640", "ZrO 5551", "ZrO 6474", "TiO 7054", "TiO 6159"],
        "gm": ["TiO 7054", "TiO 6159", "CaH 6382", "CaH 6830", "Na I 8183/8195", "Ca II 8542", "Ca II 8662"],
        "wd": ["EW(Hβ ±50 Å)", "FWHM(Hβ absorption)", "FWHM(Hγ absorption)", "FWHM(Hδ absorption)", "H9 contrast",
               "He I 4471", "He I 5876", "continuum slope"],
    }
    rs = rest(np.ones(WL.shape), ivar=np.full(WL.shape, 100.0))
    for task, names in required.items():
        measured = [m.name for m in RULES_TASKS[task].measure(rs).values()]
        for name in names:
            assert any(name in n for n in measured), (task, name, measured)


def test_missing_width_says_which_kind_of_missing():
    """No line at all: the width is not significant (pixels usable, no feature); a masked window: not measurable,
    no usable pixels. The two read differently (issue 26)."""
    conts = ((4720.0, 4750.0), (5010.0, 5050.0))
    flat = line_fwhm(rest(np.ones_like(WL)), 4862.7, 100.0, conts, emission=False, name="FWHM(Hβ)")
    assert flat.value is None and flat.no_signal
    assert flat.fmt().startswith("FWHM(Hβ) not significant (without significant absorption")
    mask = (WL > 4600) & (WL < 5100)
    masked = line_fwhm(rest(1.0 - gauss(4862.7, 30.0, 10.0), mask=mask), 4862.7, 100.0, conts, emission=False,
                       name="FWHM(Hβ)")
    assert masked.value is None and not masked.no_signal
    assert masked.fmt().startswith("FWHM(Hβ) not measurable (no usable pixels: ")


def test_fwhm_error_scales_with_the_noise_not_the_pixel():
    """A 30 Å absorption line: the width's error from the bootstrap grows 4x when the noise does (not the pixel
    width, which does not change), and matches the scatter of the width over noise draws."""
    conts = ((4720.0, 4750.0), (5010.0, 5050.0))
    clean = 1.0 - gauss(4862.7, 30.0, 8.0)
    out = {}
    for sigma in (0.01, 0.04):
        rng = np.random.default_rng(1)
        vals, errs = [], []
        for _ in range(40):
            rs = rest(clean + rng.normal(0, sigma, WL.size), ivar=np.full(WL.shape, sigma**-2))
            m = line_fwhm(rs, 4862.7, 100.0, conts, emission=False)
            vals.append(m.value)
            errs.append(m.error)
        out[sigma] = (np.median(errs), np.std(vals, ddof=1))
        assert 0.6 < out[sigma][0] / out[sigma][1] < 1.7, (sigma, out[sigma])
    assert 2.5 < out[0.04][0] / out[0.01][0] < 6.0, out
