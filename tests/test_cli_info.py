"""`spec-vet info PATH [--target ID] [--json]`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from astropy.io import fits
from click.testing import CliRunner

from spec_vetting.cli import main

DATA = Path(__file__).parent / "data" / "real"
REQUIRED = {"survey", "variant", "n_pixels", "wavelength_min", "wavelength_max", "ids", "pipeline_class",
            "pipeline_subclass", "redshift"}


def _run(*args):
    return CliRunner().invoke(main, ["info", *map(str, args)])


def test_json_single_spectrum():
    r = _run(DATA / "spec-0907-52373-0419.fits", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert REQUIRED <= set(out)
    assert (out["survey"], out["variant"], out["n_pixels"]) == ("sdss", "sdss-spec-lite", 3844)
    assert out["ids"] == {"plate": 907, "mjd": 52373, "fiberid": 419, "specobjid": 1021306429161629696}
    assert (out["pipeline_class"], out["pipeline_subclass"]) == ("QSO", "STARBURST BROADLINE")
    assert 3800 < out["wavelength_min"] < out["wavelength_max"] < 9300


def test_json_multi_target_desi_lists_targets_and_counts_skips():
    r = _run(DATA / "coadd-sv3-dark-26065.fits", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert isinstance(out, list) and [o["ids"]["targetid"] for o in out] == [39627866878511337, 39627866878514741]
    assert all(REQUIRED <= set(o) and o["survey"] == "desi" for o in out)
    assert "skipped 3 of 5 fibres" in r.stderr


def test_target_and_redrock_join():
    r = _run(DATA / "coadd-4-80613-thru20210324.fits", "--target", "39633345008634465", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["pipeline_class"] == "GALAXY" and abs(out["redshift"] - 0.3687) < 1e-3
    assert out["ids"]["tileid"] == 80613


def test_trimmed_file_ids_are_rows(tmp_path):
    p = tmp_path / "trimmed.fits"
    with fits.open(DATA / "coadd-4-80613-thru20210324.fits") as h:
        hdus = [fits.PrimaryHDU()] + [fits.ImageHDU(h[n].data, name=n) for a in "BRZ"
                                      for n in (f"{a}_FLUX", f"{a}_IVAR", f"{a}_WAVELENGTH")]
    fits.HDUList(hdus).writeto(p)
    out = json.loads(_run(p, "--json").stdout)
    assert [o["ids"] for o in out] == [{"row": 0}]


def test_unknown_target_exits_nonzero_naming_file_and_target():
    path = DATA / "coadd-sv3-dark-26065.fits"
    r = _run(path, "--target", "42")
    assert r.exit_code == 1
    assert str(path) in r.stderr and "target 42" in r.stderr


def test_bad_input_exits_nonzero_with_message(tmp_path):
    p = tmp_path / "x.fits"
    p.write_text("hello")
    r = _run(p)
    assert r.exit_code == 1 and "not a FITS file" in r.stderr and str(p) in r.stderr


def test_text_output_is_readable():
    r = _run(DATA / "spec-55862-B6212_sp06-006.fits")
    assert r.exit_code == 0, r.output
    assert "lamost-lrs-dr1-image" in r.stdout and "STAR K5" in r.stdout and "3700.0-9088.7" in r.stdout
    assert "relative" in r.stdout
    assert np.isfinite(float(r.stdout.split("S/N:")[1].split()[0]))
