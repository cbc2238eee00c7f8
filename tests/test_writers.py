"""Writers: synthetic spectra written in each real layout read back through the survey readers unchanged."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from astropy.io import fits

from spec_vetting.io import known_layouts, list_targets, read_spectrum, sniff_layout
from spec_vetting.synthetic.desi import write_desi_coadd, write_redrock
from spec_vetting.synthetic.grids import DESI_ARMS, resample
from spec_vetting.synthetic.synthetic import make_spectrum
from spec_vetting.synthetic.writers import LAYOUTS, native_grid, write_spectrum

#: the single-spectrum layouts and the variant their reader gives: the writers use the readers' layout names
READ_VARIANT = {
    layout: layout
    for layout in ("lamost-lrs-dr1-image", "lamost-lrs-image", "lamost-lrs-coadd-table", "sdss-spec-lite",
                   "sdss-spspec", "sdssv-spec")
}  # fmt: skip


def assert_same(read, written, *, ivar_rtol=1e-6):
    assert len(read) == len(written)
    # float32 storage: LAMOST wavelength rows ~6e-8, SDSS loglam ~6e-7 relative (the surveys' own precision)
    assert np.allclose(read.wavelength, written.wavelength, rtol=1.5e-6, atol=0)
    assert np.allclose(read.flux, written.flux, rtol=1e-6, atol=0)
    assert np.allclose(read.ivar, written.ivar, rtol=ivar_rtol, atol=0)
    assert np.array_equal(read.mask, written.mask)


def test_every_writer_layout_is_a_reader_layout_and_reads_back(tmp_path):
    """The writers name layouts as the reader registry does: each file written is sniffed and read as its layout."""
    assert set(LAYOUTS) <= set(known_layouts())
    for layout in LAYOUTS:
        s = make_spectrum("k_star", seed=8, wavelength=native_grid(layout))
        path = write_spectrum(s, tmp_path / f"{layout}.fits", layout)
        assert sniff_layout(path) == layout
        target = list_targets(path)[0] if layout == "desi-coadd" else None
        assert read_spectrum(path, target).meta.variant == layout


@pytest.mark.parametrize("layout", list(READ_VARIANT))
def test_single_spectrum_layouts_round_trip(tmp_path, layout):
    s = make_spectrum("carbon", seed=4, wavelength=native_grid(layout))
    path = write_spectrum(s, tmp_path / "x.fits", layout)
    r = read_spectrum(path)
    assert r.meta.variant == READ_VARIANT[layout]
    assert_same(r, s)
    assert_same(read_spectrum(path, backend="fitsio"), s)  # the fast path reads our files the same way
    assert r.meta.pipeline_class == "STAR"
    # spSpec files hold only a SPEC_CLN class code, every other layout a subclass
    assert r.meta.pipeline_subclass == (None if layout == "sdss-spspec" else "Carbon")
    assert r.meta.redshift == pytest.approx(s.meta.redshift, abs=1e-7)
    assert r.meta.ra == pytest.approx(s.meta.ra)


def test_lamost_ids_and_release_quirks(tmp_path):
    s = make_spectrum("m_giant", seed=2)
    ids = s.meta.ids
    dr1 = read_spectrum(write_spectrum(s, tmp_path / "dr1.fits", "lamost-lrs-dr1-image"))
    dr7 = read_spectrum(write_spectrum(s, tmp_path / "dr7.fits", "lamost-lrs-image"))
    for r in (dr1, dr7):
        for key in ("designation", "planid", "lmjd", "spid", "fiberid"):
            assert r.meta.ids[key] == ids[key]
    assert "obsid" not in dr1.meta.ids  # DR1 files carry no OBSID
    assert dr7.meta.ids["obsid"] == ids["obsid"]
    with fits.open(tmp_path / "dr1.fits") as h:
        hdr = h[0].header
        assert h[0].data.shape == (5, 3909) and "EXTNAME" not in hdr
        assert hdr["EXTEN0"] == "Flux Inverse Subcontinuum Andmask Ormask"
        assert hdr["CTYPE1"] == "LINEAR" and hdr["COEFF0"] == pytest.approx(3.5682) and hdr["COEFF1"] == 1e-4
        assert "SN_G" in hdr and "SNRG" not in hdr and "OBSID" not in hdr
        assert np.median(h[0].data[2][h[0].data[1] > 0]) == pytest.approx(1.0, abs=0.1)  # continuum-normalised row
    with fits.open(tmp_path / "dr7.fits") as h:
        assert h[0].header["EXTNAME"] == "Flux" and "SNRG" in h[0].header
        assert h[0].data[2][0] == pytest.approx(3699.99, abs=0.01)  # the wavelength row


def test_lamost_dr10_table_keeps_the_naxis_quirk(tmp_path):
    path = write_spectrum(make_spectrum("k_star", seed=1), tmp_path / "123.fits", "lamost-lrs-coadd-table")
    with fits.open(path) as h:
        assert h[0].header["NAXIS"] == 0 and h[0].header["NAXIS1"] == 3909 and h[0].header["NAXIS2"] == 5
        assert h[0].header["DATA_V"] == "LAMOST DR10"
        assert h[1].name == "COADD" and h[1].data.shape == (1,)
        assert h[1].columns.names == ["FLUX", "IVAR", "WAVELENGTH", "ANDMASK", "ORMASK", "NORMALIZATION"]
        assert h[1].columns["FLUX"].format == "3909E"


def test_gzip_bytes_under_a_fits_name(tmp_path):
    s = make_spectrum("wd_db", seed=5)
    path = write_spectrum(s, tmp_path / "101008.fits", "lamost-lrs-image", gzip=True)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert_same(read_spectrum(path), s)
    gz = write_spectrum(s, tmp_path / "spec.fits.gz", "lamost-lrs-dr1-image")
    assert gzip.decompress(gz.read_bytes())[:6] == b"SIMPLE"
    assert_same(read_spectrum(gz), s)


def test_sdss_flavours_and_header_trap(tmp_path):
    legacy = make_spectrum("galaxy", seed=3, wavelength=native_grid("sdss-spec-lite", flavour="legacy"))
    boss = make_spectrum("qso", seed=3, wavelength=native_grid("sdss-spec-lite", flavour="boss"))
    lp = write_spectrum(legacy, tmp_path / "legacy.fits", "sdss-spec-lite")
    bp = write_spectrum(boss, tmp_path / "boss.fits", "sdss-spec-lite", flavour="boss")
    with fits.open(lp) as h:
        assert [x.name for x in h] == ["PRIMARY", "COADD", "SPECOBJ", "SPZLINE"]
        assert h[0].header["COEFF0"] != pytest.approx(h[1].data["loglam"][0], abs=1e-5)  # do not trust COEFF0
        assert h[1].columns["and_mask"].format == "J" and len(h[3].data) == 29
    with fits.open(bp) as h:
        assert h[2].name == "SPALL" and h[0].header["RUN2D"] == "v5_13_2"
    rl, rb = read_spectrum(lp), read_spectrum(bp)
    assert_same(rl, legacy)
    assert_same(rb, boss)
    assert rl.meta.pipeline_class == "GALAXY" and rb.meta.pipeline_class == "QSO"
    assert rb.meta.redshift == pytest.approx(boss.meta.redshift, rel=1e-6)
    assert 3600 < rb.wavelength[0] < 3650 and rb.wavelength[-1] > 10000
    assert {"plate", "mjd", "fiberid", "specobjid"} <= set(rl.meta.ids)


def test_desi_coadd_round_trip_with_skips_and_redrock(tmp_path):
    grid = native_grid("desi-coadd")
    spectra = [make_spectrum(k, seed=5, wavelength=grid) for k in ("qso", "m_dwarf", "wd_db")]
    coadd = tmp_path / "coadd-sv3-dark-26065.fits"
    tids = write_desi_coadd(spectra, coadd, redrock_path=tmp_path / "redrock-sv3-dark-26065.fits")
    assert sniff_layout(coadd) == "desi-coadd"
    skipped = []
    assert list_targets(coadd, on_skip=skipped.append) == tids  # the stuck and the sky fibre are skipped
    assert len(skipped) == 2
    with fits.open(coadd) as h:
        assert h["B_MASK"].header["BZERO"] == 2147483648 and h["B_MASK"].data.dtype == np.uint32
        assert h["B_WAVELENGTH"].data.size == DESI_ARMS["B"][1] and h["Z_WAVELENGTH"].data[-1] == pytest.approx(9824)
        assert h["B_RESOLUTION"].data.shape == (5, 11, 2751)
        assert list(h["FIBERMAP"].data["OBJTYPE"]) == ["", "TGT", "SKY", "TGT", "TGT"]
    for s, tid in zip(spectra, tids, strict=True):
        r = read_spectrum(coadd, tid)  # the redrock file beside the coadd is joined
        assert_same(r, s, ivar_rtol=1e-5)  # overlap ivar is split between arms and summed back
        assert r.meta.ids["targetid"] == tid
        assert r.meta.redshift == pytest.approx(s.meta.redshift)
    assert read_spectrum(coadd, tids[0]).meta.pipeline_class == "QSO"
    assert read_spectrum(coadd, tids[2]).meta.pipeline_subclass == "WD"


def test_desi_single_write_spectrum_and_tile_layout(tmp_path):
    s = make_spectrum("cv", seed=9)  # LAMOST grid: resampled onto the DESI arms
    path = write_spectrum(s, tmp_path / "coadd-4-80613-thru20210324.fits", "desi-coadd", healpix=None, tileid=80613)
    r = read_spectrum(path)  # one usable target: no TARGETID needed
    assert r.meta.variant == "desi-coadd" and r.meta.ids.get("tileid") == 80613
    assert r.wavelength[0] == pytest.approx(3600) and r.wavelength[-1] == pytest.approx(9824)
    inside = (r.wavelength > 3720) & (r.wavelength < 9000) & r.good
    assert np.allclose(r.flux[inside], np.interp(r.wavelength[inside], s.wavelength, s.flux), rtol=0.2, atol=50)
    assert not r.good[r.wavelength < s.wavelength[0]].any()  # outside the source: no data


def test_write_redrock_alone(tmp_path):
    s = make_spectrum("galaxy", seed=1)
    path = write_redrock([s], tmp_path / "redrock-x.fits", [123], sky_targetids=[616088619186127404])
    with fits.open(path) as h:
        rs = h["REDSHIFTS"].data
        assert list(rs["TARGETID"]) == [123, 616088619186127404] and list(rs["ZWARN"]) == [0, 1]
        assert rs["SPECTYPE"][0] == "GALAXY" and rs["Z"][0] == pytest.approx(s.meta.redshift)
        assert "RRVER" in h[0].header and len(h["FIBERMAP"].data) == 2


def test_resample_keeps_features_and_masks_outside(tmp_path):
    s = make_spectrum("cv", seed=1, snr=200)
    grid = np.linspace(3500, 9500, 5000)
    r = resample(s, grid)
    assert r.mask[grid < s.wavelength[0]].all() and r.mask[grid > s.wavelength[-1]].all()
    ha = (grid > 6540) & (grid < 6590)
    assert r.flux[ha].max() > 1.5 * np.median(r.flux[(grid > 6700) & (grid < 6800)])


def test_unknown_layout_and_option(tmp_path):
    s = make_spectrum("cv", seed=1)
    with pytest.raises(ValueError, match="unknown layout"):
        write_spectrum(s, tmp_path / "x.fits", "lamost-mrs")
    with pytest.raises(TypeError, match="unknown option"):
        write_spectrum(s, tmp_path / "x.fits", "lamost-lrs-image", flavour="boss")
    assert set(LAYOUTS) == set(READ_VARIANT) | {"desi-coadd"}


def test_spspec_layout_follows_the_dr7_data_model(tmp_path):
    s = make_spectrum("wd_da", seed=6, wavelength=native_grid("sdss-spspec"))
    path = write_spectrum(s, tmp_path / "spSpec-51630-0266-145.fit", "sdss-spspec")
    with fits.open(path) as h:
        assert len(h) == 1 and h[0].data.shape == (4, len(s))
        hdr = h[0].header
        assert hdr["CTYPE1"] == "LINEAR" and hdr["DC-FLAG"] == 1 and hdr["SPEC_CLN"] == 1  # STAR
        sigma = h[0].data[2]
        good = s.ivar > 0
        np.testing.assert_allclose(sigma[good], 1 / np.sqrt(s.ivar[good]), rtol=1e-6)  # sigma, not ivar
        assert (sigma[~good] == 0).all()
    r = read_spectrum(path)
    with fits.open(path) as h:
        hdr = h[0].header
        assert r.meta.ids == {"plate": hdr["PLATEID"], "mjd": hdr["MJD"], "fiberid": hdr["FIBERID"]}
    assert r.meta.pipeline_class == "STAR" and r.meta.redshift == pytest.approx(s.meta.redshift)


def test_sdssv_layout_carries_field_and_catalogid(tmp_path):
    s = make_spectrum("cv", seed=6, wavelength=native_grid("sdssv-spec"))
    path = write_spectrum(s, tmp_path / "spec-101077-59630-27021597848749000.fits", "sdssv-spec")
    with fits.open(path) as h:
        assert [x.name for x in h] == ["PRIMARY", "COADD", "SPALL", "SPZLINE"]
        assert "PLATEID" not in h[0].header and "PLATE" not in h["SPALL"].columns.names
        catalogid = int(h["SPALL"].data["CATALOGID"][0])
    m = read_spectrum(path).meta
    assert set(m.ids) == {"field", "mjd", "catalogid", "fiberid"} and m.ids["catalogid"] == catalogid
    assert m.pipeline_version == "v6_1_3" and m.pipeline_subclass == "CV"
