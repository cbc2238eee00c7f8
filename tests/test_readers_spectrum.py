"""The one Spectrum type every reader returns: float64 arrays, a strictly increasing grid, a boolean bad mask,
and a rest-frame copy for a given redshift."""

from __future__ import annotations

import numpy as np
import pytest

from spec_vetting.spectrum import Spectrum, SpectrumMeta


def _spectrum(n=5, redshift=0.5, **kw):
    meta = SpectrumMeta(survey="lamost", variant="lamost-lrs-image", path="x.fits", ids={"obsid": 1},
                        redshift=redshift, snr_bands={"g": 3.0})
    args = dict(wavelength=np.linspace(4000, 5000, n, dtype=np.float32), flux=np.arange(n, dtype=np.float32),
                ivar=np.ones(n), mask=np.zeros(n, dtype=int), flux_unit="", meta=meta)
    args.update(kw)
    return Spectrum(**args)


def test_arrays_are_converted_to_float64_and_bool():
    s = _spectrum()
    assert s.wavelength.dtype == s.flux.dtype == s.ivar.dtype == np.float64 and s.mask.dtype == bool
    assert len(s) == 5 and s.n_good == 5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"wavelength": np.array([4000.0, 4100, 4100, 4200, 4300])}, "not strictly increasing"),
        ({"wavelength": np.array([4300.0, 4200, 4100, 4000, 3900])}, "not strictly increasing"),
        ({"flux": np.ones(4)}, "flux has shape"),
        ({"mask": np.zeros(6, dtype=bool)}, "mask has shape"),
    ],
)
def test_broken_arrays_are_refused_naming_the_file(change, message):
    with pytest.raises(ValueError, match=message) as err:
        _spectrum(**change)
    assert "x.fits" in str(err.value)


def test_good_pixels_exclude_mask_zero_ivar_and_non_finite_flux():
    s = _spectrum(mask=np.array([0, 1, 0, 0, 0]), ivar=np.array([1.0, 1, 0, 1, 1]),
                  flux=np.array([1.0, 1, 1, np.nan, 1]))
    assert s.good.tolist() == [True, False, False, False, True]


@pytest.mark.parametrize(("redshift", "meta_z", "factor"), [(None, 0.5, 1.5), (1.0, 0.5, 2.0), (None, None, 1.0),
                                                             (None, float("nan"), 1.0)])
def test_rest_frame_divides_by_one_plus_z(redshift, meta_z, factor):
    s = _spectrum(redshift=meta_z)
    r = s.rest_frame(redshift)
    np.testing.assert_allclose(r.wavelength, s.wavelength / factor)
    np.testing.assert_array_equal(r.flux, s.flux)  # no (1+z) flux scaling, as the trained zoom tool plots it


def test_rest_frame_is_a_copy():
    s = _spectrum()
    r = s.rest_frame()
    r.flux[0] = 99.0
    r.mask[1] = True
    r.meta.ids["obsid"] = 2
    r.meta.snr_bands["g"] = 0.0
    assert s.flux[0] == 0.0 and not s.mask[1]
    assert s.meta.ids == {"obsid": 1} and s.meta.snr_bands == {"g": 3.0}
