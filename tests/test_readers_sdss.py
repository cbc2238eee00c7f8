"""SDSS readers: spec lite/full (loglam authoritative, mask bits), spSpec (sigma -> ivar), SDSS-V layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits

from spec_vetting.errors import SpectrumReadError, UnsupportedFormatError
from spec_vetting.io import read_spectrum, sniff_layout
from spec_vetting.io.sdss import BAD_PIXEL_BITS

DATA = Path(__file__).parent / "data" / "real"
LITE = DATA / "spec-0907-52373-0419.fits"


def _copy(src: Path, dst: Path, edit=None) -> Path:
    with fits.open(src) as h:
        hdul = fits.HDUList([hdu.copy() for hdu in h])
    if edit:
        edit(hdul)
    hdul.writeto(dst)
    return dst


@pytest.mark.parametrize("backend", ["astropy", "fitsio"])
def test_spec_lite_legacy(backend):
    s = read_spectrum(LITE, backend=backend)
    m = s.meta
    assert (m.survey, m.variant) == ("sdss", "sdss-spec-lite")
    assert m.ids == {"plate": 907, "mjd": 52373, "fiberid": 419, "specobjid": 1021306429161629696}
    assert (m.pipeline_class, m.pipeline_subclass) == ("QSO", "STARBURST BROADLINE")
    assert m.redshift == pytest.approx(0.07396341860294342)
    assert m.pipeline_version == "26"
    with fits.open(LITE) as h:
        np.testing.assert_allclose(s.wavelength, 10.0 ** h["COADD"].data["loglam"].astype(np.float64))
    assert 3790 < s.wavelength[0] < 3820 and 9150 < s.wavelength[-1] < 9250
    assert s.flux_unit == "1e-17 erg / (s cm2 Angstrom)"
    import astropy.units as u

    assert u.Unit(s.flux_unit) == 1e-17 * u.erg / u.s / u.cm**2 / u.AA
    assert m.snr == pytest.approx(19.03, abs=0.01)  # SN_MEDIAN_ALL from SPECOBJ
    assert set(m.snr_bands) == set("ugriz")


def test_wavelength_from_loglam_never_from_primary_header(tmp_path):
    def edit(hdul):
        hdul[0].header["COEFF0"] = 3.5  # spPlate start: must be ignored
        hdul[0].header["CRVAL1"] = 3.5

    s = read_spectrum(_copy(LITE, tmp_path / "s.fits", edit))
    assert s.wavelength[0] > 3790


def test_and_mask_bits_pixel_level_only_and_ivar_zero(tmp_path):
    def edit(hdul):
        d = hdul["COADD"].data
        d["and_mask"][:] = 0
        d["and_mask"][10:20] = 1 << 4  # MANYBADCOLUMNS: fibre-level, data fine
        d["and_mask"][20:30] = 1 << 16  # NEARBADPIXEL: a warning
        d["and_mask"][30:40] = 1 << 23  # BRIGHTSKY
        d["and_mask"][40:50] = 1 << 24  # NODATA
        d["ivar"][50:60] = 0.0

    s = read_spectrum(_copy(LITE, tmp_path / "s.fits", edit))
    assert not s.mask[10:30].any()
    assert s.mask[30:50].all()
    assert s.mask[50:60].all()
    assert set(BAD_PIXEL_BITS) >= {18, 23, 24}


def test_full_spec_is_told_from_lite(tmp_path):
    def edit(hdul):
        frame = fits.BinTableHDU.from_columns(
            [fits.Column(name="flux", format="E", array=np.ones(5))], name="B1-00012345-00012344-00012343"
        )
        hdul.append(frame)

    path = _copy(LITE, tmp_path / "full.fits", edit)
    assert sniff_layout(path) == "sdss-spec-full"
    assert sniff_layout(LITE) == "sdss-spec-lite"


def _write_spspec(path: Path, nrows: int) -> tuple[np.ndarray, np.ndarray]:
    n = 3000
    rng = np.random.default_rng(1)
    flux = 10 + rng.normal(0, 1, n)
    sigma = np.full(n, 0.5)
    sigma[5:8] = 0.0  # no data
    mask = np.zeros(n)
    mask[100:103] = 1 << 23
    rows = [flux, flux - 10, sigma, mask] + ([np.zeros(n)] * (nrows - 4))
    hdu = fits.PrimaryHDU(np.array(rows, dtype=np.float32))
    h = hdu.header
    h["TELESCOP"] = "SDSS 2.5-M"
    h["COEFF0"] = 3.5801
    h["COEFF1"] = 1e-4
    h["CTYPE1"] = "LINEAR"
    h["BUNIT"] = "1E-17 erg/cm/s/Ang"
    h["PLATEID"] = 266
    h["MJD"] = 51630
    h["FIBERID"] = 145
    h["SPEC_CLN"] = 4
    h["Z"] = 3.1
    h["Z_ERR"] = 0.002
    h["Z_WARNIN"] = 0
    h["RAOBJ"] = 150.1
    h["DECOBJ"] = 2.2
    hdu.writeto(path)
    return flux, sigma


@pytest.mark.parametrize("nrows", [4, 5])
def test_spspec_sigma_to_ivar(tmp_path, nrows):
    path = tmp_path / "spSpec-51630-0266-145.fit"
    flux, sigma = _write_spspec(path, nrows)
    s = read_spectrum(path)
    m = s.meta
    assert (m.survey, m.variant) == ("sdss", "sdss-spspec")
    np.testing.assert_allclose(s.wavelength, 10 ** (3.5801 + 1e-4 * np.arange(flux.size)))
    np.testing.assert_allclose(s.flux, flux.astype(np.float32))
    assert s.ivar[0] == pytest.approx(4.0)
    assert (s.ivar[5:8] == 0).all() and s.mask[5:8].all()
    assert s.mask[100:103].all()
    assert m.ids == {"plate": 266, "mjd": 51630, "fiberid": 145}
    assert (m.pipeline_class, m.pipeline_subclass) == ("QSO", "HIZ_QSO")
    assert m.redshift == pytest.approx(3.1)
    assert (m.ra, m.dec) == (pytest.approx(150.1), pytest.approx(2.2))


def test_sdssv_spec_field_mjd_catalogid(tmp_path):
    def edit(hdul):
        prim = hdul[0].header
        for key in ("PLATEID", "FIBERID"):
            prim.remove(key, ignore_missing=True)
        prim["FIELD"] = 101077
        prim["OBSERV"] = "APO"
        old = hdul["SPECOBJ"].data
        cols = [
            fits.Column(name="FIELD", format="J", array=[101077]),
            fits.Column(name="MJD", format="J", array=[59630]),
            fits.Column(name="CATALOGID", format="K", array=[27021597848749000]),
            fits.Column(name="FIBERID", format="J", array=[312]),
            fits.Column(name="CLASS", format="6A", array=["STAR"]),
            fits.Column(name="SUBCLASS", format="21A", array=["CV"]),
            fits.Column(name="Z", format="E", array=[0.0001]),
            fits.Column(name="Z_ERR", format="E", array=[1e-5]),
            fits.Column(name="ZWARNING", format="J", array=[0]),
            fits.Column(name="RUN2D", format="8A", array=["v6_0_9"]),
            fits.Column(name="PLUG_RA", format="D", array=[old["PLUG_RA"][0]]),
            fits.Column(name="PLUG_DEC", format="D", array=[old["PLUG_DEC"][0]]),
        ]
        hdul[2] = fits.BinTableHDU.from_columns(cols, name="SPALL")

    path = _copy(LITE, tmp_path / "spec-101077-59630-27021597848749000.fits", edit)
    s = read_spectrum(path)
    m = s.meta
    assert (m.survey, m.variant) == ("sdss", "sdssv-spec")
    assert m.ids == {"field": 101077, "mjd": 59630, "catalogid": 27021597848749000, "fiberid": 312}
    assert (m.pipeline_class, m.pipeline_subclass, m.pipeline_version) == ("STAR", "CV", "v6_0_9")
    np.testing.assert_array_equal(s.flux, read_spectrum(LITE).flux)


def test_spspec_with_unusable_coeff0(tmp_path):
    path = tmp_path / "spSpec-51630-0266-145.fit"
    _write_spspec(path, 4)
    with fits.open(path, mode="update") as h:
        h[0].header["COEFF0"] = "n/a"
    with pytest.raises(SpectrumReadError, match="SDSS spSpec image without a usable COEFF0") as err:
        read_spectrum(path)
    assert str(path) in str(err.value)


def test_whole_plate_image_is_refused_not_read_as_spspec(tmp_path):
    """An spPlate (one row per fibre) has the spSpec header keys; its row 2 is another fibre's flux, not sigma."""
    hdu = fits.PrimaryHDU(np.ones((640, 100), dtype=np.float32))
    hdu.header["TELESCOP"] = "SDSS 2.5-M"
    hdu.header["COEFF0"] = 3.58
    hdu.header["COEFF1"] = 1e-4
    path = tmp_path / "spPlate-0266-51630.fits"
    hdu.writeto(path)
    assert sniff_layout(path) == "sdss-spplate"
    with pytest.raises(UnsupportedFormatError, match="plate file .* not one spectrum"):
        read_spectrum(path)
