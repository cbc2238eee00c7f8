"""`spec-vet info PATH [--target ID] [--json]`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
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
    assert r.exit_code == 2  # an input no rerun fixes
    assert str(path) in r.stderr and "target 42" in r.stderr


def test_bad_input_exits_nonzero_with_message(tmp_path):
    p = tmp_path / "x.fits"
    p.write_text("hello")
    r = _run(p)
    assert r.exit_code == 2 and "not a FITS file" in r.stderr and str(p) in r.stderr


def test_text_output_is_readable():
    r = _run(DATA / "spec-55862-B6212_sp06-006.fits")
    assert r.exit_code == 0, r.output
    assert "lamost-lrs-dr1-image" in r.stdout and "STAR K5" in r.stdout and "3700.0-9088.7" in r.stdout
    assert "relative" in r.stdout
    assert np.isfinite(float(r.stdout.split("S/N:")[1].split()[0]))


#: identifier keys `info --json` must show per layout (SURVEY_FORMATS / the agreed Spectrum.meta.ids keys)
LAMOST_IDS = {"lmjd", "planid", "spid", "fiberid", "designation"}
SDSS_IDS = {"plate", "mjd", "fiberid", "specobjid"}


def _written(tmp_path, layout, name):
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.synthetic.writers import native_grid, write_spectrum

    s = make_spectrum("m_giant", seed=8, wavelength=native_grid(layout, flavour="boss"))
    return write_spectrum(s, tmp_path / name, layout)


def _full_spec(tmp_path):
    with fits.open(DATA / "spec-0907-52373-0419.fits") as h:
        hdul = fits.HDUList([hdu.copy() for hdu in h])
    hdul.append(fits.BinTableHDU.from_columns([fits.Column(name="flux", format="E", array=np.ones(5))],
                                              name="B1-00012345-00012344-00012343"))
    hdul.writeto(tmp_path / "spec-0907-52373-0419-full.fits")
    return tmp_path / "spec-0907-52373-0419-full.fits"


SINGLE_LAYOUTS = {  # variant: (how to get a file, survey, id keys, wavelength range it must fall in)
    "lamost-lrs-dr1-image": (lambda t: DATA / "spec-55862-B6212_sp06-006.fits", "lamost", LAMOST_IDS, (3690, 9110)),
    "lamost-lrs-image": (lambda t: DATA / "sbc_101008.fits", "lamost", LAMOST_IDS | {"obsid"}, (3690, 9110)),
    "lamost-lrs-coadd-table": (lambda t: _written(t, "lamost-lrs-coadd-table", "1.fits"), "lamost",
                               LAMOST_IDS | {"obsid"}, (3690, 9110)),
    "sdss-spec-lite": (lambda t: DATA / "spec-0907-52373-0419.fits", "sdss", SDSS_IDS, (3780, 9230)),
    "sdss-spec-full": (_full_spec, "sdss", SDSS_IDS, (3780, 9230)),
    "sdss-spspec": (lambda t: _written(t, "sdss-spspec", "spSpec-51630-0266-145.fit"), "sdss",
                    {"plate", "mjd", "fiberid"}, (3780, 9230)),
    "sdssv-spec": (lambda t: _written(t, "sdssv-spec", "spec-101077-59630-1.fits"), "sdss",
                   {"field", "mjd", "catalogid", "fiberid"}, (3580, 10410)),
    "desi-coadd": (lambda t: _written(t, "desi-coadd", "coadd-sv3-dark-1.fits"), "desi",
                   {"targetid", "healpix", "survey", "program"}, (3599.9, 9824.1)),
}


def _check_summary(out, variant, survey, id_keys, wave_range):
    assert REQUIRED <= set(out)
    assert (out["survey"], out["variant"]) == (survey, variant)
    assert isinstance(out["n_pixels"], int) and out["n_pixels"] > 3000
    lo, hi = wave_range
    assert lo <= out["wavelength_min"] < out["wavelength_max"] <= hi
    assert isinstance(out["ids"], dict) and set(out["ids"]) == id_keys, out["ids"]
    for key in ("pipeline_class", "pipeline_subclass"):
        assert out[key] is None or isinstance(out[key], str)
    assert out["redshift"] is None or isinstance(out["redshift"], float)


@pytest.mark.parametrize("variant", sorted(SINGLE_LAYOUTS))
def test_json_keys_for_every_layout(tmp_path, variant):
    make, survey, id_keys, wave_range = SINGLE_LAYOUTS[variant]
    r = _run(make(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    if variant == "desi-coadd":  # a multi-target file: a list even with one usable target
        assert isinstance(out, list) and len(out) == 1
        out = out[0]
    _check_summary(out, variant, survey, id_keys, wave_range)
    # the real SDSS files hold a QSO; the written m_giant carries STAR; a DESI coadd without redrock has no class
    expected = {"sdss-spec-lite": "QSO", "sdss-spec-full": "QSO", "desi-coadd": None}.get(variant, "STAR")
    assert out["pipeline_class"] == expected


def test_json_lists_real_desi_spectra_and_trimmed_files(real_dir):
    r = _run(real_dir / "desi" / "spectra-sv3-dark-26065.fits", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [o["ids"]["targetid"] for o in out] == [39627866878511337]  # the other target's exposures are flagged
    for o in out:
        _check_summary(o, "desi-spectra", "desi", {"targetid", "healpix", "survey", "program"}, (3599.9, 9824.1))
    assert "skipped 4 of 5 fibres" in r.stderr and "1 non-zero FIBERSTATUS" in r.stderr
    r = _run(real_dir / "desi" / "quasarnp_test_coadd.fits", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out) == 24 and [o["ids"] for o in out][:3] == [{"row": 0}, {"row": 1}, {"row": 2}]
    assert all(set(o["ids"]) == {"row"} for o in out)
    assert "skipped 1 of 25 fibres (1 no good pixel)" in r.stderr
    one = json.loads(_run(real_dir / "desi" / "quasarnp_test_coadd.fits", "--target", "12", "--json").stdout)
    assert one["ids"] == {"row": 12}


def test_unusable_target_exits_nonzero_naming_file_target_and_reason():
    path = DATA / "coadd-sv3-dark-26065.fits"
    r = _run(path, "--target", "616088619186127404")
    assert r.exit_code == 2
    assert str(path) in r.stderr and "target 616088619186127404" in r.stderr and "sky fibre" in r.stderr
    assert "Traceback" not in r.output


def test_target_on_a_single_spectrum_file_and_redrock_file_given_as_spectrum():
    r = _run(DATA / "spec-55862-B6212_sp06-006.fits", "--target", "3")
    assert r.exit_code == 2 and "holds a single spectrum" in r.stderr
    r = _run(DATA / "redrock-4-80613-thru20210324.fits")
    assert r.exit_code == 2 and "redshift catalogue" in r.stderr and "--redrock" in r.stderr
