"""Bad input gives a typed error naming the file and what is wrong; a garbage FITS file matches no reader."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits

from spec_vetting.errors import SpectrumReadError, UnsupportedFormatError
from spec_vetting.io import read_spectrum, sniff_layout
from spec_vetting.io.fits_open import open_fits

DATA = Path(__file__).parent / "data" / "real"
DR1 = DATA / "spec-55862-B6212_sp06-006.fits"
GZ_BYTES = DATA / "sbc_101008.fits"
BACKENDS = ["astropy", "fitsio"]


def _raises(path, match, cls=SpectrumReadError, backend=None):
    with pytest.raises(cls, match=match) as err:
        read_spectrum(path, backend=backend)
    assert str(path) in str(err.value)
    return err.value


@pytest.mark.parametrize("backend", BACKENDS)
def test_not_fits(tmp_path, backend):
    p = tmp_path / "page.fits"
    p.write_text("<html><body>404 Not Found</body></html>")
    _raises(p, "not a FITS file: it looks like HTML", backend=backend)
    empty = tmp_path / "empty.fits"
    empty.write_bytes(b"")
    _raises(empty, "not a FITS file: the file is empty", backend=backend)


def test_missing_file_and_directory(tmp_path):
    _raises(tmp_path / "nope.fits", "no such file")
    _raises(tmp_path, "is a directory")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cut", [50000, 2000])
def test_truncated_plain_file(tmp_path, backend, cut):
    p = tmp_path / "cut.fits"
    p.write_bytes(DR1.read_bytes()[:cut])
    err = _raises(p, "file is truncated", backend=backend)
    assert "download the file again" in str(err)


def test_truncated_gzip(tmp_path):
    p = tmp_path / "cut.fits"
    p.write_bytes(GZ_BYTES.read_bytes()[:20000])
    _raises(p, "gzip data is truncated or corrupt")


def test_truncated_inside_gzip(tmp_path):
    p = tmp_path / "cut.fits.gz"
    p.write_bytes(gzip.compress(gzip.decompress(GZ_BYTES.read_bytes())[:40000]))
    _raises(p, "file is truncated")


@pytest.mark.parametrize("backend", BACKENDS)
def test_garbage_fits_matches_no_reader(tmp_path, backend):
    p = tmp_path / "table.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        [fits.Column(name="A", format="E", array=np.arange(3.0))], name="STUFF")]).writeto(p)
    err = _raises(p, "unknown layout", cls=UnsupportedFormatError, backend=backend)
    assert "lamost-lrs-image" in str(err) and "desi-coadd" in str(err) and "STUFF" in str(err)
    with pytest.raises(UnsupportedFormatError):
        sniff_layout(p)


def _lamost_copy(tmp_path, edit) -> Path:
    with fits.open(DR1) as h:
        hdul = fits.HDUList([h[0].copy()])
    edit(hdul)
    p = tmp_path / "edited.fits"
    hdul.writeto(p)
    return p


def test_no_finite_flux(tmp_path):
    def edit(hdul):
        hdul[0].data[0, :] = np.nan

    _raises(_lamost_copy(tmp_path, edit), "no finite flux")


def test_no_good_pixel(tmp_path):
    def edit(hdul):
        hdul[0].data[1, :] = 0.0

    _raises(_lamost_copy(tmp_path, edit), "no good pixel")


def test_missing_hdu_is_named(tmp_path):
    p = tmp_path / "x.fits"
    fits.HDUList([fits.PrimaryHDU()]).writeto(p)
    with open_fits(p) as f, pytest.raises(SpectrumReadError, match="missing HDU 'COADD'"):
        f.image("COADD")


def test_target_given_for_single_spectrum_file():
    with pytest.raises(SpectrumReadError, match="holds a single spectrum"):
        read_spectrum(DR1, 12)


def test_redrock_given_for_non_desi_file():
    with pytest.raises(SpectrumReadError, match="only apply to DESI"):
        read_spectrum(DR1, redrock=DATA / "redrock-4-80613-thru20210324.fits")


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.fits*") if not p.name.startswith("redrock")))
def test_backends_agree(name):
    from spec_vetting.io import iter_spectra

    a = list(iter_spectra(DATA / name, backend="astropy", on_skip=lambda s: None))
    b = list(iter_spectra(DATA / name, backend="fitsio", on_skip=lambda s: None))
    assert len(a) == len(b) >= 1
    for x, y in zip(a, b, strict=True):
        for attr in ("wavelength", "flux", "ivar", "mask"):
            np.testing.assert_array_equal(getattr(x, attr), getattr(y, attr))
        assert x.meta == y.meta


def test_lamost_coadd_table_without_a_row(tmp_path):
    prim = fits.PrimaryHDU()
    prim.header["TELESCOP"] = "LAMOST"
    cols = [fits.Column(name=c, format="10E", array=np.zeros((0, 10)))
            for c in ("FLUX", "IVAR", "WAVELENGTH", "ANDMASK", "ORMASK")]
    p = tmp_path / "123.fits"
    fits.HDUList([prim, fits.BinTableHDU.from_columns(cols, name="COADD")]).writeto(p)
    _raises(p, "the COADD table has no row")


def test_lamost_dr1_with_unusable_coeff0(tmp_path):
    def edit(hdul):
        hdul[0].header["COEFF0"] = "abc"

    err = _raises(_lamost_copy(tmp_path, edit), "without a usable COEFF0 header keyword")
    assert "download it again" in str(err)


def _desi_copy(tmp_path, edit) -> Path:
    with fits.open(DATA / "coadd-4-80613-thru20210324.fits") as h:
        hdus = [hdu.copy() for hdu in h]
    hdus = edit(hdus) or hdus
    p = tmp_path / "coadd-x.fits"
    fits.HDUList(hdus).writeto(p)
    return p


@pytest.mark.parametrize("backend", BACKENDS)
def test_desi_missing_arm_hdu_is_named(tmp_path, backend):
    p = _desi_copy(tmp_path, lambda hdus: [h for h in hdus if h.name != "R_IVAR"])
    err = _raises(p, "missing HDU 'R_IVAR'", backend=backend)
    assert "R_FLUX" in str(err)  # what the file has instead


def test_desi_empty_wavelength_arm(tmp_path):
    def edit(hdus):
        next(h for h in hdus if h.name == "B_WAVELENGTH").data = np.zeros(0)

    _raises(_desi_copy(tmp_path, edit), "B_WAVELENGTH is empty")


def test_desi_fibermap_without_targetid_lists_columns(tmp_path):
    def edit(hdus):
        fm = next(i for i, h in enumerate(hdus) if h.name == "FIBERMAP")
        hdus[fm] = fits.BinTableHDU.from_columns([c for c in hdus[fm].columns if c.name != "TARGETID"],
                                                 name="FIBERMAP")

    _raises(_desi_copy(tmp_path, edit), r"missing column 'TARGETID' in FIBERMAP \(columns found: .*TARGET_RA")
