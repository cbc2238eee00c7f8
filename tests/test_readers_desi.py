"""DESI readers: arm merging, usable-target selection and skips, TARGETID lookup, redrock join, trimmed and
per-exposure files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits

from spec_vetting.errors import SpectrumReadError, TargetNotFoundError
from spec_vetting.io import iter_spectra, list_targets, read_spectrum, sniff_layout
from spec_vetting.io.desi import _merge_arms
from spec_vetting.io.redrock import find_redrock_file

DATA = Path(__file__).parent / "data" / "real"
HEALPIX = DATA / "coadd-sv3-dark-26065.fits"  # 5 rows: 2 negative TARGETIDs, 1 sky, 2 science
TILE = DATA / "coadd-4-80613-thru20210324.fits"  # 1 target, redrock file beside it
SCIENCE = [39627866878511337, 39627866878514741]


def test_merge_arms_combines_overlap_by_inverse_variance():
    w1 = np.arange(10.0)
    w2 = np.arange(8.0, 15.0)
    f1, f2 = np.full(10, 1.0), np.full(7, 3.0)
    i1, i2 = np.full(10, 1.0), np.full(7, 3.0)
    g1, g2 = np.ones(10, bool), np.ones(7, bool)
    g2[1] = False  # wave 9: only the first arm is good there
    wave, flux, ivar, good = _merge_arms([(w1, f1, i1, g1), (w2, f2, i2, g2)])
    np.testing.assert_array_equal(wave, np.arange(15.0))
    assert flux[8] == pytest.approx((1 * 1 + 3 * 3) / 4) and ivar[8] == pytest.approx(4)
    assert flux[9] == pytest.approx(1.0) and ivar[9] == pytest.approx(1.0)
    assert flux[12] == 3.0 and good.all()


def test_merge_arms_misaligned_grids_interpolate_in_overlap():
    w1 = np.arange(10.0)
    w2 = np.arange(8.5, 15.5)
    ones = np.ones(10), np.ones(7)
    wave, flux, ivar, good = _merge_arms([(w1, 2 * ones[0], ones[0], ones[0] > 0), (w2, 2 * ones[1], ones[1],
                                                                                    ones[1] > 0)])
    assert np.all(np.diff(wave) > 0)
    assert wave[-1] == 14.5 and np.allclose(flux, 2.0)
    assert ivar[9] == pytest.approx(2.0) and ivar[8] == pytest.approx(1.0)  # 8.0 is outside arm 2


@pytest.mark.parametrize("backend", ["astropy", "fitsio"])
def test_healpix_coadd_usable_targets_and_skip_report(backend):
    skipped = []
    assert list_targets(HEALPIX, on_skip=skipped.append, backend=backend) == SCIENCE
    reasons = sorted(s.reason for s in skipped)
    assert len(reasons) == 3
    assert sum("negative TARGETID" in r for r in reasons) == 2
    assert any("OBJTYPE=SKY" in r for r in reasons)
    assert all(s.path == str(HEALPIX) for s in skipped)


def test_skip_count_goes_to_stderr_without_callback(capsys):
    specs = list(iter_spectra(HEALPIX))
    assert [s.meta.ids["targetid"] for s in specs] == SCIENCE
    err = capsys.readouterr().err
    assert "skipped 3 of 5 fibres" in err and "sky fibre" in err


@pytest.mark.parametrize("backend", ["astropy", "fitsio"])
def test_read_by_targetid_merges_arms(backend):
    s = read_spectrum(HEALPIX, SCIENCE[1], backend=backend)
    m = s.meta
    assert (m.survey, m.variant) == ("desi", "desi-coadd")
    assert m.ids == {"targetid": SCIENCE[1], "healpix": 26065, "survey": "sv3", "program": "dark"}
    assert m.ra == pytest.approx(217.03928419) and m.dec == pytest.approx(3.21221873)
    assert s.wavelength[0] == pytest.approx(3600.0) and s.wavelength[-1] == pytest.approx(9824.0)
    assert np.all(np.diff(s.wavelength) > 0)
    assert len(s) == 7781  # 2751 + 2326 + 2881 minus the 51 + 126 shared overlap pixels
    with fits.open(HEALPIX) as h:
        b_flux, b_ivar, b_mask = (h[f"B_{x}"].data[4].astype(float) for x in ("FLUX", "IVAR", "MASK"))
        r_flux, r_ivar, r_mask = (h[f"R_{x}"].data[4].astype(float) for x in ("FLUX", "IVAR", "MASK"))
        rw = h["R_WAVELENGTH"].data
    np.testing.assert_array_equal(s.flux[:100], b_flux[:100])
    # first R pixel (5760 Å) lies in the B/R overlap: ivar-weighted mean of the two good values
    k = int(np.argmin(np.abs(s.wavelength - rw[0])))
    j = int(np.argmin(np.abs(h_b_wave() - rw[0])))
    wb = b_ivar[j] * (b_mask[j] == 0)
    wr = r_ivar[0] * (r_mask[0] == 0)
    assert s.ivar[k] == pytest.approx(wb + wr)
    assert s.flux[k] == pytest.approx((b_flux[j] * wb + r_flux[0] * wr) / (wb + wr))
    assert s.flux_unit == "10**-17 erg/(s cm2 Angstrom)"


def h_b_wave():
    with fits.open(HEALPIX) as h:
        return h["B_WAVELENGTH"].data.copy()


def test_unknown_and_unusable_targets_are_errors_naming_file_and_target():
    with pytest.raises(TargetNotFoundError) as err:
        read_spectrum(HEALPIX, 1234)
    assert str(HEALPIX) in str(err.value) and "1234" in str(err.value)
    with pytest.raises(TargetNotFoundError, match="sky fibre"):
        read_spectrum(HEALPIX, 616088619186127404)
    with pytest.raises(TargetNotFoundError, match="2 usable spectra"):
        read_spectrum(HEALPIX)  # several targets: say which


def test_tile_coadd_joins_redrock_found_beside_it():
    assert find_redrock_file(TILE) == DATA / "redrock-4-80613-thru20210324.fits"
    s = read_spectrum(TILE)  # the one usable target
    m = s.meta
    assert m.ids == {"targetid": 39633345008634465, "tileid": 80613, "petal": 4}
    assert (m.pipeline_class, m.pipeline_subclass) == ("GALAXY", None)
    assert m.redshift == pytest.approx(0.3687, abs=1e-4)
    assert m.redshift_warning == 0
    no_join = read_spectrum(TILE, redrock=False).meta
    assert no_join.pipeline_class is None and no_join.redshift is None


def test_explicit_redrock_path(tmp_path):
    target = tmp_path / "elsewhere.fits"
    target.write_bytes(TILE.read_bytes())
    assert read_spectrum(target).meta.redshift is None
    rr = DATA / "redrock-4-80613-thru20210324.fits"
    assert read_spectrum(target, redrock=rr).meta.pipeline_class == "GALAXY"
    assert sniff_layout(rr) == "desi-redrock"


def _trimmed(path: Path, nan_row: int | None = None, dead_row: int | None = None) -> Path:
    with fits.open(HEALPIX) as h:
        hdus = [fits.PrimaryHDU()]
        for arm in "BRZ":
            flux = h[f"{arm}_FLUX"].data.copy()
            if nan_row is not None:
                flux[nan_row] = np.nan
            hdus.append(fits.ImageHDU(flux, name=f"{arm}_FLUX"))
            ivar = h[f"{arm}_IVAR"].data.copy()
            if dead_row is not None:
                ivar[dead_row] = 0.0
            hdus.append(fits.ImageHDU(ivar, name=f"{arm}_IVAR"))
            hdus.append(fits.ImageHDU(h[f"{arm}_WAVELENGTH"].data, name=f"{arm}_WAVELENGTH"))
    fits.HDUList(hdus).writeto(path)
    return path


def test_trimmed_coadd_without_fibermap_is_read_by_row(tmp_path):
    path = _trimmed(tmp_path / "test_coadd.fits")
    assert sniff_layout(path) == "desi-coadd"
    rows = list_targets(path, on_skip=lambda s: None)
    assert rows == [r for r in range(5) if r in rows] and 4 in rows
    s = read_spectrum(path, 4)
    assert s.meta.ids == {"row": 4}
    assert s.flux_unit == "1e-17 erg / (s cm2 Angstrom)"  # BUNIT dropped: DESI's unit
    np.testing.assert_array_equal(s.flux, read_spectrum(HEALPIX, SCIENCE[1]).flux)
    with pytest.raises(TargetNotFoundError, match="rows 0-4"):
        read_spectrum(path, 7)


def test_no_finite_flux_target(tmp_path):
    path = _trimmed(tmp_path / "nan.fits", nan_row=2)
    skipped = []
    assert 2 not in list_targets(path, on_skip=skipped.append)
    assert any(s.row == 2 and s.reason == "no good pixel" for s in skipped)
    with pytest.raises(SpectrumReadError, match="no finite flux") as err:
        read_spectrum(path, 2)
    assert str(path) in str(err.value) and "target 2" in str(err.value)


def test_no_good_pixel_target(tmp_path):
    path = _trimmed(tmp_path / "dead.fits", dead_row=4)
    assert 4 not in list_targets(path, on_skip=lambda s: None)
    with pytest.raises(SpectrumReadError, match="no good pixel"):
        read_spectrum(path, 4)


def _spectra_file(path: Path) -> Path:
    """A per-exposure file: the tile coadd's one target observed twice (second exposure: 4x the ivar, flux+1)."""
    with fits.open(TILE) as h:
        fm = h["FIBERMAP"].data
        cols = [fits.Column(name="TARGETID", format="K", array=np.repeat(fm["TARGETID"], 3)),
                fits.Column(name="OBJTYPE", format="3A", array=["TGT", "TGT", "TGT"]),
                fits.Column(name="FIBERSTATUS", format="J", array=[0, 0, 4]),
                fits.Column(name="EXPID", format="J", array=[1, 2, 3]),
                fits.Column(name="TARGET_RA", format="D", array=np.repeat(fm["TARGET_RA"], 3)),
                fits.Column(name="TARGET_DEC", format="D", array=np.repeat(fm["TARGET_DEC"], 3))]
        prim = fits.PrimaryHDU()
        prim.header["TILEID"] = 80613
        hdus = [prim, fits.BinTableHDU.from_columns(cols, name="FIBERMAP")]
        for arm in "BRZ":
            f0, i0 = h[f"{arm}_FLUX"].data[0], h[f"{arm}_IVAR"].data[0]
            hdus.append(fits.ImageHDU(h[f"{arm}_WAVELENGTH"].data, name=f"{arm}_WAVELENGTH"))
            hdus.append(fits.ImageHDU(np.stack([f0, f0 + 1, f0 + 100]), name=f"{arm}_FLUX"))
            hdus.append(fits.ImageHDU(np.stack([i0, 4 * i0, i0]), name=f"{arm}_IVAR"))
            mask = np.zeros((3, f0.size), dtype=np.uint32)
            hdus.append(fits.CompImageHDU(mask, name=f"{arm}_MASK"))
    fits.HDUList(hdus).writeto(path)
    return path


@pytest.mark.parametrize("backend", ["astropy", "fitsio"])
def test_spectra_file_coadds_good_exposures_by_ivar(tmp_path, backend):
    path = _spectra_file(tmp_path / "spectra-4-80613-thru20210324.fits")
    assert sniff_layout(path) == "desi-spectra"
    s = read_spectrum(path, 39633345008634465, redrock=False, backend=backend)
    ref = read_spectrum(TILE, redrock=False)
    assert s.meta.variant == "desi-spectra"
    good = ~ref.mask & ~s.mask
    # exposure 3 has FIBERSTATUS != 0 and is left out; weights 1:4 give flux + 0.8
    np.testing.assert_allclose(s.flux[good], ref.flux[good] + 0.8, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.ivar[good], 5 * ref.ivar[good], rtol=1e-5)


def test_file_whose_every_fibre_is_skipped_says_why(tmp_path):
    with fits.open(HEALPIX) as h:
        hdus = [hdu.copy() for hdu in h]
    fm = next(x for x in hdus if x.name == "FIBERMAP")
    fm.data["COADD_FIBERSTATUS"][:] = 8
    path = tmp_path / "coadd-dead.fits"
    fits.HDUList(hdus).writeto(path)
    assert list_targets(path, on_skip=lambda s: None) == []
    with pytest.raises(TargetNotFoundError, match="no usable science spectrum: all 5 fibres are skipped") as err:
        read_spectrum(path)
    assert "COADD_FIBERSTATUS=8" in str(err.value) and str(path) in str(err.value)


def test_pre_everest_zbest_file_is_joined_like_redrock(tmp_path):
    """zbest-*.fits (no real file found): HDU ZBEST with SUBTYPE char[6]; found beside coadd-X as zbest-X."""
    with fits.open(DATA / "redrock-4-80613-thru20210324.fits") as h:
        rs = h["REDSHIFTS"].data
        cols = [fits.Column(name="TARGETID", format="K", array=rs["TARGETID"]),
                fits.Column(name="Z", format="D", array=rs["Z"] + 0.001),
                fits.Column(name="ZERR", format="D", array=rs["ZERR"]),
                fits.Column(name="ZWARN", format="K", array=np.full(len(rs), 4)),
                fits.Column(name="SPECTYPE", format="6A", array=["QSO"] * len(rs)),
                fits.Column(name="SUBTYPE", format="6A", array=["LOZ"] * len(rs))]
    prim = fits.PrimaryHDU()
    prim.header["RRVER"] = "0.15.4"
    coadd = tmp_path / "coadd-4-80613-thru20210324.fits"
    coadd.write_bytes(TILE.read_bytes())
    zbest = tmp_path / "zbest-4-80613-thru20210324.fits"
    fits.HDUList([prim, fits.BinTableHDU.from_columns(cols, name="ZBEST")]).writeto(zbest)
    assert find_redrock_file(coadd) == zbest and sniff_layout(zbest) == "desi-redrock"
    m = read_spectrum(coadd).meta
    assert (m.pipeline_class, m.pipeline_subclass, m.redshift_warning) == ("QSO", "LOZ", 4)
    assert m.redshift == pytest.approx(0.3687 + 0.001, abs=1e-4)
