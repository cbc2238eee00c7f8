"""LAMOST LRS readers: DR1 image (log-linear COEFF0/COEFF1), DR2+ image, DR8+ COADD table, key drift, MRS refusal."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits

from spec_vetting.errors import UnsupportedFormatError
from spec_vetting.io import read_spectrum, sniff_layout

DATA = Path(__file__).parent / "data" / "real"
DR1 = DATA / "spec-55862-B6212_sp06-006.fits"
DR7_GZ_BYTES = DATA / "sbc_101008.fits"  # gzip bytes under a .fits name
DR6_GZ = DATA / "spec-57287-KP193637N444141V03_sp10-161.fits.gz"
BACKENDS = ["astropy", "fitsio"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_dr1_wavelength_from_coeff_as_log10_not_wcs(backend):
    s = read_spectrum(DR1, backend=backend)
    assert s.meta.variant == "lamost-lrs-dr1-image"
    n = len(s)
    assert n == 3904
    expected = 10 ** (3.5682 + 1e-4 * np.arange(n))
    np.testing.assert_allclose(s.wavelength, expected, rtol=1e-12)
    # CTYPE1='LINEAR' CRVAL1=3.5682: a WCS reader would give ~3.57, not ~3700 Å
    assert 3690 < s.wavelength[0] < 3710 and 9000 < s.wavelength[-1] < 9100


def test_dr1_identifiers_class_and_snr():
    m = read_spectrum(DR1).meta
    assert m.survey == "lamost"
    assert m.ids == {"lmjd": 55862, "spid": 6, "fiberid": 6, "designation": "LAMOST J063657.24+272227.2",
                     "planid": "B6212"}
    assert "obsid" not in m.ids  # absent before DR2/3
    assert (m.pipeline_class, m.pipeline_subclass) == ("STAR", "K5")
    assert m.redshift == pytest.approx(3.729e-05)
    assert m.snr_bands["g"] == pytest.approx(10.56)  # from SN_G (DR1 key names)
    assert m.snr is not None and m.snr > 0
    assert m.pipeline_version == "v2.6.4"


def test_and_mask_is_bad_or_mask_is_not_and_no_data_is_masked(tmp_path):
    def edit(hdul):
        data = hdul[0].data
        data[3, 100:110] = 1.0  # AND mask: bad in every exposure
        data[4, 200:210] = 1.0  # OR mask only: bad in some exposure, the coadd still has data
        data[1, 300:305] = 0.0  # no data

    s = read_spectrum(_write_like(DR7_GZ_BYTES, tmp_path / "m.fits", edit))
    assert s.flux_unit == ""
    assert s.mask[100:110].all()
    assert not s.mask[200:210].any()
    assert s.mask[300:305].all() and (s.ivar[300:305] == 0).all()
    assert s.mask.dtype == bool


@pytest.mark.parametrize("path", [DR7_GZ_BYTES, DR6_GZ])
def test_dr2_plus_image_with_wavelength_row_from_gzip(path):
    s = read_spectrum(path)
    assert s.meta.variant == "lamost-lrs-image"
    raw = gzip.decompress(path.read_bytes())
    with fits.open(io.BytesIO(raw)) as h:
        np.testing.assert_array_equal(s.wavelength, h[0].data[2].astype(np.float64))
        np.testing.assert_array_equal(s.flux, h[0].data[0].astype(np.float64))
    assert s.meta.ids["obsid"] > 0
    assert s.meta.data_release.startswith("LAMOST DR")
    assert set(s.meta.snr_bands) == {"u", "g", "r", "i", "z"}  # SNRU.. (DR6+ names)


def _write_like(src: Path, dst: Path, edit) -> Path:
    raw = src.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    with fits.open(io.BytesIO(raw)) as h:
        hdul = fits.HDUList([hdu.copy() for hdu in h])
    edit(hdul)
    hdul.writeto(dst)
    return dst


def test_string_fiberid_and_old_sn_keys(tmp_path):
    def edit(hdul):
        hdr = hdul[0].header
        hdr["FIBERID"] = "27"
        hdr["VERSPIPE"] = "2.7.5"
        for b in "UGRIZ":
            hdr[f"SN_{b}"] = hdr.pop(f"SNR{b}")

    s = read_spectrum(_write_like(DR7_GZ_BYTES, tmp_path / "x.fits", edit))
    assert s.meta.ids["fiberid"] == 27
    assert s.meta.snr_bands["r"] > 0


def _coadd_table_from_image(src: Path, dst: Path, *, drop: str | None = None) -> Path:
    raw = gzip.decompress(src.read_bytes())
    with fits.open(io.BytesIO(raw)) as h:
        img = h[0].data.astype(np.float32)
        hdr = h[0].header.copy()
    n = img.shape[1]
    prim = fits.PrimaryHDU()
    for key, value in hdr.items():
        if key not in ("SIMPLE", "BITPIX", "NAXIS", "NAXIS1", "NAXIS2", "EXTEND", "EXTNAME", "COMMENT", "HISTORY",
                       "EXTEN0", ""):
            prim.header[key] = value
    prim.header["DATA_V"] = "LAMOST DR10"
    names = ["FLUX", "IVAR", "WAVELENGTH", "ANDMASK", "ORMASK", "NORMALIZATION"]
    rows = [img[0], img[1], img[2], img[3], img[4], img[0] / np.median(img[0])]
    cols = [fits.Column(name=nm, format=f"{n}E", array=r[None, :])
            for nm, r in zip(names, rows, strict=True) if nm != drop]
    fits.HDUList([prim, fits.BinTableHDU.from_columns(cols, name="COADD")]).writeto(dst)
    return dst


@pytest.mark.parametrize("backend", BACKENDS)
def test_dr8_coadd_table_matches_image(tmp_path, backend):
    path = _coadd_table_from_image(DR7_GZ_BYTES, tmp_path / "123.fits")
    s = read_spectrum(path, backend=backend)
    ref = read_spectrum(DR7_GZ_BYTES)
    assert s.meta.variant == "lamost-lrs-coadd-table"
    np.testing.assert_array_equal(s.wavelength, ref.wavelength)
    np.testing.assert_array_equal(s.flux, ref.flux)
    np.testing.assert_array_equal(s.mask, ref.mask)
    assert s.meta.ids == ref.meta.ids
    assert s.meta.data_release == "LAMOST DR10"


def test_dr8_coadd_table_missing_column_names_it(tmp_path):
    path = _coadd_table_from_image(DR7_GZ_BYTES, tmp_path / "bad.fits", drop="IVAR")
    with pytest.raises(Exception) as err:
        read_spectrum(path)
    assert "missing column 'IVAR' in COADD" in str(err.value)
    assert str(path) in str(err.value)


def test_mrs_file_is_refused_with_a_message(tmp_path):
    prim = fits.PrimaryHDU()
    prim.header["EXTNAME"] = "Information"
    prim.header["TELESCOP"] = "LAMOST"
    cols = [fits.Column(name=c, format="E", array=np.ones(10)) for c in ("FLUX", "IVAR", "LOGLAM")]
    hdul = fits.HDUList([prim, fits.BinTableHDU.from_columns(cols, name="COADD_B"),
                         fits.BinTableHDU.from_columns(cols, name="COADD_R")])
    path = tmp_path / "med-58408-TD230151N343645T01_sp01-015.fits"
    hdul.writeto(path)
    assert sniff_layout(path) == "lamost-mrs"
    with pytest.raises(UnsupportedFormatError, match="medium-resolution"):
        read_spectrum(path)
