"""Signs of an extragalactic object when the redshift is unknown: emission where no star at rest has a line."""

from __future__ import annotations

import numpy as np
import pytest

from spec_vetting.engines.rules.diagnostics import RestSpectrum
from spec_vetting.engines.rules.redshift import REST_EMISSION_LINES, unexplained_emission
from spec_vetting.synthetic.synthetic import KINDS, make_spectrum

STARS = [k for k in KINDS if k not in ("qso", "galaxy")]
SEEDS = range(5101, 5109)


def at_rest(sp):
    return RestSpectrum.from_spectrum(sp, None)


def snr_of(seed):
    return 8.0 + 52.0 * ((seed * 0.618) % 1.0)


@pytest.mark.parametrize("kind", STARS)
def test_no_star_shows_unexplained_emission(kind):
    # band heads (C2, TiO, ZrO), the flux between two bands or two broad Balmer lines, a CV's broad Balmer and He
    # emission: none is a line at an impossible wavelength
    for seed in SEEDS:
        found = unexplained_emission(at_rest(make_spectrum(kind, seed=seed, snr=snr_of(seed))))
        assert found is None, (kind, seed, found)


@pytest.mark.parametrize("kind", ["qso", "galaxy"])
def test_most_redshifted_objects_show_unexplained_emission(kind):
    # not all: a passive galaxy has no strong line; about 80 % of either kind over 40 seeds
    hits = [unexplained_emission(at_rest(make_spectrum(kind, seed=s, snr=snr_of(s)))) for s in SEEDS]
    assert sum(h is not None for h in hits) >= 5, hits


def test_a_line_is_found_where_it_is_and_described():
    wl = np.arange(3700.0, 9000.0, 1.0)
    flux = 1.0 + 3.0 * np.exp(-0.5 * ((wl - 6000.0) / 25.0) ** 2)  # a broad line at 6000 Å: Lyα at z = 3.9
    found = unexplained_emission(RestSpectrum.from_arrays(wl, flux, np.full(wl.shape, 400.0), None, None))
    assert found is not None and found.wavelength == pytest.approx(6000.0, abs=10.0)
    assert f"at {found.wavelength:.0f} Å" in found.describe() and "matches none of the lines" in found.describe()
    m = found.measurement()
    assert m.ok and m.windows[0][0] < 6000.0 < m.windows[0][1]


def test_lines_at_rest_wavelengths_are_explained():
    wl = np.arange(3700.0, 9000.0, 1.0)
    flux = np.ones(wl.shape)
    for line in (6564.61, 4862.68, 5008.2, 5877.3):  # Hα, Hβ, [O III], He I: a star, a CV or a nebula at rest
        flux = flux + 2.0 * np.exp(-0.5 * ((wl - line) / 4.0) ** 2)
    assert unexplained_emission(RestSpectrum.from_arrays(wl, flux, np.full(wl.shape, 400.0))) is None
    assert 6564.61 in REST_EMISSION_LINES


def test_masked_or_noisy_data_finds_nothing():
    wl = np.arange(3700.0, 9000.0, 1.0)
    flux = 1.0 + 3.0 * np.exp(-0.5 * ((wl - 6000.0) / 25.0) ** 2)
    noisy = RestSpectrum.from_arrays(wl, flux, np.full(wl.shape, 0.01))  # sigma 10 on a line of height 3
    assert unexplained_emission(noisy) is None
    masked = RestSpectrum.from_arrays(wl, flux, np.full(wl.shape, 400.0), (wl > 5900) & (wl < 6100))
    assert unexplained_emission(masked) is None
