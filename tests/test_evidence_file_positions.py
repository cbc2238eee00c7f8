"""Gaia evidence for a candidate list that gives only file paths: the position and epoch come from each real
LAMOST, SDSS and DESI file, ``position_source`` says whose position was matched, and a list position more than 2"
from its file's is noted in the row.

Oracle: the files' own header cards and tables read here with astropy.io.fits (LAMOST RA/DEC/MJD, SDSS
PLUG_RA/PLUG_DEC/MJD, DESI FIBERMAP TARGET_RA/TARGET_DEC and the EXP_FIBERMAP MJDs of the target), and the catalog
sources placed with astropy's ``apply_space_motion``: each moves 2"/yr, so that only the file's own epoch (not
2016.0, not a wrong year) brings it within the 1" radius.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("lsdb")

from spec_vetting.synthetic.hats import write_hats  # noqa: E402

FILES = {
    "lamost/spec-55862-B6212_sp06-044.fits": "lamost",
    "lamost/pylasp_3703110.fits": "lamost",
    "sdss/spec-0266-51602-0013.fits": "sdss",
    "sdss/spec-7338-57859-0739.fits": "sdss",
    "desi/coadd-4-80613-thru20210324.fits": "desi",
    "desi/coadd-special-dark-27247.fits": "desi",
}
PM = (1200.0, -1600.0)  # 2"/yr


def _oracle_position(path, survey):
    """(ra, dec, mjd) from the file itself, read with astropy as the survey's data model describes."""
    from astropy.io import fits

    with fits.open(path) as f:
        h = f[0].header
        if survey == "lamost":
            return float(h["RA"]), float(h["DEC"]), float(h["MJD"])
        if survey == "sdss":
            return float(h["PLUG_RA"]), float(h["PLUG_DEC"]), float(h["MJD"])
        fm = f["FIBERMAP"].data
        tid = fm["TARGETID"][0]
        exp = f["EXP_FIBERMAP"].data
        mjds = exp["MJD"][exp["TARGETID"] == tid]
        return float(fm["TARGET_RA"][0]), float(fm["TARGET_DEC"][0]), float((mjds.min() + mjds.max()) / 2)


def _back_to_2016(ra, dec, mjd):
    from astropy import units as u
    from astropy.coordinates import Distance, SkyCoord
    from astropy.time import Time

    c = SkyCoord(ra=ra * u.deg, dec=dec * u.deg, pm_ra_cosdec=PM[0] * u.mas / u.yr, pm_dec=PM[1] * u.mas / u.yr,
                 distance=Distance(10.0, u.pc), radial_velocity=0 * u.km / u.s, obstime=Time(mjd, format="mjd"))
    moved = c.apply_space_motion(new_obstime=Time(2016.0, format="jyear"))
    return float(moved.ra.deg), float(moved.dec.deg)


def test_positions_and_epochs_come_from_the_files(real_dir, tmp_path):
    from click.testing import CliRunner

    from spec_vetting.catalog.read import read_verdicts
    from spec_vetting.cli import main

    truth, sources = {}, []
    for i, (rel, survey) in enumerate(FILES.items()):
        ra, dec, mjd = _oracle_position(real_dir / rel, survey)
        truth[rel] = (ra, dec, mjd)
        ra16, dec16 = _back_to_2016(ra, dec, mjd)
        sources.append({"source_id": 1000 + i, "ra": ra16, "dec": dec16, "parallax": 5.0, "parallax_error": 0.1,
                        "pmra": PM[0], "pmdec": PM[1], "phot_g_mean_mag": 15.0, "bp_rp": 1.0, "ruwe": 1.0})
        # a motionless decoy where the source would be without its motion
        sources.append({**sources[-1], "source_id": 2000 + i, "ra": ra, "dec": dec + 3.0 / 3600, "pmra": 0.0,
                        "pmdec": 0.0})
    write_hats(pd.DataFrame(sources), tmp_path / "gaia", margin_arcsec=10.0)
    paths = [str(real_dir / rel) for rel in FILES]
    # the last row also gives a list position 5" north of the file's: matched there, noted in the row
    off_ra, off_dec, off_mjd = truth[list(FILES)[-1]]
    listed = pd.DataFrame({"path": paths, "ra": [None] * (len(paths) - 1) + [off_ra],
                           "dec": [None] * (len(paths) - 1) + [off_dec + 5.0 / 3600]})
    listed.to_csv(tmp_path / "list.csv", index=False)
    r = CliRunner().invoke(main, ["run", "--candidates", str(tmp_path / "list.csv"), "--task", "wd",
                                  "--out", str(tmp_path / "c"), "--engine", "rules", "--threads", "--workers", "1",
                                  "--no-dashboard", "--no-progress", "--evidence", f"gaia={tmp_path / 'gaia'}"])
    assert r.exit_code == 0, r.output
    rows = read_verdicts(tmp_path / "c").to_pandas().set_index("path")
    for i, rel in enumerate(FILES):
        row = rows.loc[str(real_dir / rel)]
        extra = json.loads(row["evidence_extra"])
        if i < len(FILES) - 1:
            assert extra["position_source"] == "file", rel
            assert row["gaia_source_id"] == 1000 + i and row["gaia_sep_arcsec"] < 0.01, rel
            assert row["gaia_n_within"] == 1 and pd.isna(row["value_notes"]), rel
        else:  # matched at the list's position 5" away: outside the radius, and the row says why
            assert extra["position_source"] == "list"
            assert pd.isna(row["gaia_source_id"]) and row["gaia_n_within"] == 0
            assert "5.0 arcsec from the spectrum file's" in row["value_notes"]
        assert np.isclose(row["ra"], truth[rel][0], atol=1e-6), rel  # the row's position is the file's
