"""Every file in ../shared/data/real/MANIFEST.csv reads with the right survey, variant, wavelength range,
identifiers and the survey pipeline's class; the MRS file is refused; redrock files join their coadds."""

from __future__ import annotations

import pytest

from spec_vetting.errors import UnsupportedFormatError
from spec_vetting.io import iter_spectra, read_spectrum, sniff_layout

pytestmark = pytest.mark.real_data

#: layout variant per file-name pattern (the survey formats' documentation, worked out by hand for each real file)
EXPECTED_VARIANT = [
    ("lamost/med-", "lamost-mrs"),
    ("lamost/pylasp_", "lamost-lrs-coadd-table"),
    ("lamost/sbc_", "lamost-lrs-image"),
    ("lamost/spec-55862-", "lamost-lrs-dr1-image"),
    ("lamost/spec-5", "lamost-lrs-image"),
    ("sdss/spec-0332-", "sdss-spec-full"),
    ("sdss/spec-1325-", "sdss-spec-full"),
    ("sdss/spec-4455-", "sdss-spec-full"),
    ("sdss/spec-733", "sdss-spec-full"),
    ("sdss/spec-", "sdss-spec-lite"),
    ("desi/redrock-", "desi-redrock"),
    ("desi/spectra-", "desi-spectra"),
    ("desi/", "desi-coadd"),
]
RANGES = {  # plausible first/last wavelength (Å) per survey flavour
    "lamost": ((3690, 3710), (9000, 9110)),
    "sdss-legacy": ((3780, 3840), (9150, 9230)),
    "sdss-boss": ((3580, 3620), (10300, 10410)),
    "desi": ((3599.9, 3600.1), (9823.9, 9824.1)),
}


def _variant(path: str) -> str:
    return next(v for prefix, v in EXPECTED_VARIANT if path.startswith(prefix))


def test_manifest_lists_files(manifest):
    assert len(manifest) >= 30


@pytest.mark.slow
def test_every_manifest_file(manifest, real_dir):
    for row in manifest:
        path = real_dir / row["path"]
        variant = _variant(row["path"])
        assert sniff_layout(path) == variant, row["path"]
        if variant == "lamost-mrs":
            with pytest.raises(UnsupportedFormatError, match="medium-resolution"):
                read_spectrum(path)
            continue
        if variant == "desi-redrock":
            continue  # checked through the coadds below
        spectra = list(iter_spectra(path, on_skip=lambda s: None))
        assert spectra, row["path"]
        for s in spectra:
            m = s.meta
            assert (m.survey, m.variant) == (row["survey"], variant), row["path"]
            flavour = m.survey if m.survey != "sdss" else ("sdss-boss" if s.wavelength[-1] > 9500 else "sdss-legacy")
            (lo0, lo1), (hi0, hi1) = RANGES[flavour]
            assert lo0 < s.wavelength[0] < lo1 and hi0 < s.wavelength[-1] < hi1, (row["path"], s.wavelength[[0, -1]])
            assert s.n_good > 0.5 * len(s)
        s = spectra[0]
        m = s.meta
        if m.survey == "lamost":
            assert {"lmjd", "spid", "fiberid", "planid", "designation"} <= set(m.ids), row["path"]
            if not row["path"].startswith("lamost/spec-55862"):
                assert m.ids["obsid"] > 0
        elif m.survey == "sdss":
            assert {"plate", "mjd", "fiberid", "specobjid"} <= set(m.ids)
            plate, mjd, fiber = row["path"].split("/")[1].split("-")[1:4]
            assert (m.ids["plate"], m.ids["mjd"], m.ids["fiberid"]) == (int(plate), int(mjd), int(fiber[:4]))
        else:
            name = row["path"].split("/")[1]
            if name.startswith("quasarnp"):  # trimmed: no FIBERMAP, spectra are addressed by row
                assert [x.meta.ids for x in spectra] == [{"row": x.meta.row} for x in spectra]
                assert len({x.meta.row for x in spectra}) == len(spectra) == 24
            elif name.split("-")[1].isdigit():  # tile files: coadd-PETAL-TILEID-thruNIGHT
                petal, tile = (int(x) for x in name.split("-")[1:3])
                assert m.ids == {"targetid": m.ids["targetid"], "tileid": tile, "petal": petal}, name
            else:  # healpix files: coadd-SURVEY-PROGRAM-PIXNUM
                survey, program, pixnum = name.split(".")[0].split("-")[1:4]
                assert m.ids == {"targetid": m.ids["targetid"], "healpix": int(pixnum), "survey": survey,
                                 "program": program}, name
            if not name.startswith("quasarnp"):
                assert all(x.meta.ids["targetid"] > 0 for x in spectra)  # skipped fibres have negative ones
        if row["pipeline_class"]:
            assert m.pipeline_class == row["pipeline_class"], row["path"]
            assert (m.pipeline_subclass or "") == row["pipeline_subclass"], row["path"]
            assert m.redshift == pytest.approx(float(row["pipeline_z"]), rel=1e-5, abs=1e-7), row["path"]


@pytest.mark.parametrize("coadd", ["coadd-4-80613-thru20210324.fits", "coadd-special-dark-27247.fits"])
def test_desi_class_from_paired_redrock(manifest, real_dir, coadd):
    rr_row = next(r for r in manifest if r["path"] == "desi/" + coadd.replace("coadd-", "redrock-"))
    m = read_spectrum(real_dir / "desi" / coadd).meta
    assert m.pipeline_class == rr_row["pipeline_class"]
    assert m.redshift == pytest.approx(float(rr_row["pipeline_z"]), abs=1e-4)


def test_redrock_test_file_rows(manifest, real_dir):
    from spec_vetting.io.redrock import read_redshifts

    row = next(r for r in manifest if r["path"] == "desi/redrock-test.fits")
    rows, version = read_redshifts(real_dir / "desi" / "redrock-test.fits")
    assert [r.spectype for r in rows.values()] == row["pipeline_class"].split(";")
    assert [round(r.z, 4) for r in rows.values()] == [float(z) for z in row["pipeline_z"].split(";")]
    assert version and version.startswith("0.19")
    assert list(rows.values())[0].zwarn == 1  # the sky fibre


def test_desi_spectra_with_compressed_masks(real_dir):
    s = read_spectrum(real_dir / "desi" / "spectra-sv3-dark-26065.fits", 39627866878511337)
    c = read_spectrum(real_dir / "desi" / "coadd-sv3-dark-26065.fits", 39627866878511337, redrock=False)
    assert s.meta.variant == "desi-spectra" and len(s) == len(c)
    assert s.mask.sum() < 0.05 * len(s)


def test_lamost_dr1_coeff_grid_matches_stored_rows_of_later_files(real_dir):
    """SURVEY_FORMATS: the stored wavelength row and 10**(COEFF0+COEFF1*i) agree to ~1e-3 Å."""
    import numpy as np

    s = read_spectrum(real_dir / "lamost" / "spec-58397-EG014118N254444M01_sp03-031.fits")
    np.testing.assert_allclose(s.wavelength, 10 ** (3.5682 + 1e-4 * np.arange(len(s))), atol=2e-3)
