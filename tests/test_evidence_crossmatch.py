"""Evidence beyond the spectrum: epoch propagation, M_G, and the Gaia cross-match of a run through lsdb.

Oracles are independent of the code under test: astropy's ``SkyCoord.apply_space_motion`` for the proper-motion
propagation (it also places the fast-moving fixture source), hand-computed M_G values from the formula, and
fixture tables whose expected matches are known by construction. The HATS catalogs are built in a temporary
folder with lsdb's ``from_dataframe`` + ``to_hats``; nothing is downloaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd
import pytest

pytest.importorskip("lsdb")

from spec_vetting.catalog.listing import read_manifest  # noqa: E402
from spec_vetting.catalog.read import read_verdicts  # noqa: E402
from spec_vetting.errors import ConfigError, RunFailedError  # noqa: E402
from spec_vetting.evidence.motion import mjd_from_name, mjd_to_jyear, propagate  # noqa: E402
from spec_vetting.evidence.photometry import absolute_g  # noqa: E402
from spec_vetting.pipeline import job_from_dict, runner  # noqa: E402
from spec_vetting.synthetic.hats import write_hats  # noqa: E402

#: the spectra's epoch: MJD 59580.5 = 2022-01-01, six years after Gaia DR3's 2016.0
MJD = 59580.5


def _astropy_move(ra, dec, pmra, pmdec, t0: float, t1: float):
    from astropy import units as u
    from astropy.coordinates import Distance, SkyCoord
    from astropy.time import Time

    c = SkyCoord(ra=ra * u.deg, dec=dec * u.deg, pm_ra_cosdec=pmra * u.mas / u.yr, pm_dec=pmdec * u.mas / u.yr,
                 distance=Distance(10.0, u.pc), radial_velocity=0 * u.km / u.s,
                 obstime=Time(t0, format="jyear"))
    moved = c.apply_space_motion(new_obstime=Time(t1, format="jyear"))
    return moved.ra.deg, moved.dec.deg


@pytest.mark.parametrize("ra, dec, pmra, pmdec, years", [
    (10.0, 5.0, 3000.0, -2000.0, 6.0),
    (200.0, -45.0, -800.0, 4100.0, -10.5),
    (359.9999, 0.0, 5000.0, 0.0, 3.0),  # through ra = 0
    (45.0, 89.99, 1000.0, 1000.0, 8.0),  # by the pole
])
def test_propagation_matches_astropy(ra, dec, pmra, pmdec, years):
    from astropy import units as u
    from astropy.coordinates import SkyCoord

    exp_ra, exp_dec = _astropy_move(ra, dec, pmra, pmdec, 2016.0, 2016.0 + years)
    got_ra, got_dec = propagate(ra, dec, pmra, pmdec, years)
    sep = SkyCoord(got_ra * u.deg, got_dec * u.deg).separation(SkyCoord(exp_ra * u.deg, exp_dec * u.deg))
    assert sep.to(u.mas).value < 1.0  # below a milliarcsecond over tens of arcseconds of motion


def test_epochs_from_mjd_and_file_names():
    from astropy.time import Time

    assert mjd_to_jyear(51544.5) == 2000.0  # J2000.0 by definition
    assert mjd_to_jyear(MJD) == pytest.approx(Time(MJD, format="mjd").jyear, abs=1e-9)
    assert mjd_from_name("/x/spec-55859-F5902_sp01-001.fits.gz") == 55859  # LAMOST
    assert mjd_from_name("spec-0266-51602-0013.fits") == 51602  # SDSS
    assert mjd_from_name("coadd-main-dark-10032.fits") is None


def test_absolute_magnitude_from_the_formula_and_its_reasons():
    # G = 15, parallax 10 mas (100 pc): M_G = 15 - 5 = 10; sigma = 5/ln10 * 0.1/10 = 0.0217147
    mg, err, why = absolute_g(15.0, 10.0, 0.1)
    assert mg == pytest.approx(10.0) and err == pytest.approx(0.0217147, rel=1e-5) and why is None
    mg, err, why = absolute_g(12.3, 2.5, 0.5)  # parallax/error = 5: just significant
    assert mg == pytest.approx(12.3 + 5 * math.log10(0.025)) and err == pytest.approx(5 / math.log(10) * 0.5 / 2.5)
    assert absolute_g(15.0, 1.0, 0.5)[2].startswith("parallax not significant")
    assert absolute_g(15.0, -0.4, 0.2)[2].startswith("parallax not positive")
    assert absolute_g(None, 1.0, 0.1)[2] == "no G magnitude"


# ---------------------------------------------------------------------------------------------------- the run


def _src(source_id, ra, dec, plx=5.0, plx_err=0.1, pmra=0.0, pmdec=0.0, g=15.0, bp_rp=1.0):
    return {"source_id": source_id, "ra": ra, "dec": dec, "parallax": plx, "parallax_error": plx_err, "pmra": pmra,
            "pmdec": pmdec, "phot_g_mean_mag": g, "bp_rp": bp_rp, "ruwe": 1.01}


#: the high-proper-motion source: at (120, 30) in 2016.0, moving 3"/yr east and -2"/yr north (21.6" by 2022)
FAST = dict(ra=120.0, dec=30.0, pmra=3000.0, pmdec=-2000.0)
ARCSEC = 1 / 3600


def _fixture_catalog(folder):
    fast_ra, fast_dec = _astropy_move(FAST["ra"], FAST["dec"], FAST["pmra"], FAST["pmdec"], 2016.0,
                                      float(mjd_to_jyear(MJD)))
    rows = [
        _src(1, 10.0, 5.0, plx=10.0, plx_err=0.1, g=15.0, bp_rp=0.2),  # exact: M_G = 10.0
        _src(2, FAST["ra"], FAST["dec"], pmra=FAST["pmra"], pmdec=FAST["pmdec"], plx=50.0, plx_err=0.05, g=14.0),
        # a motionless decoy 3" from where the fast source is in 2022: outside the 1" radius
        _src(3, fast_ra + 3 * ARCSEC / math.cos(math.radians(fast_dec)), fast_dec),
        _src(4, 50.0 + 0.3 * ARCSEC, -20.0),  # two within 1" of candidate "two": 0.3" wins
        _src(5, 50.0, -20.0 + 0.7 * ARCSEC),
        _src(6, 80.0, 40.0 + 1.2 * ARCSEC),  # just outside the radius of candidate "outside"
        _src(7, 150.0, -60.0, plx=-0.5, plx_err=0.3),  # negative parallax
        _src(8, 200.0, 10.0, plx=1.0, plx_err=0.5),  # parallax/error = 2
    ]
    write_hats(pd.DataFrame(rows), folder)
    return fast_ra, fast_dec


@dataclass
class Cand:
    """A candidate as the pipeline sees one (the list reader is tested elsewhere)."""

    candidate_id: str
    ra: float | None
    dec: float | None
    mjd: float | None = MJD
    path: str | None = None
    target: int | None = None
    task: str | None = None
    label: str | None = None
    inline: object = None
    prompt: str | None = None
    given_evidence: dict = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)

    def load_spectrum(self):
        from spec_vetting.synthetic.synthetic import make_spectrum

        return make_spectrum("wd_da", seed=3)


@pytest.fixture(scope="module")
def gaia_catalog(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hats") / "gaia"
    fast = _fixture_catalog(folder)
    return folder, fast


def _run(tmp_path, monkeypatch, cands, catalog, **extra):
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: cands)
    job = job_from_dict({
        "candidates": ["unused.csv"], "tasks": ["wd"], "out": str(tmp_path / "cat"), "engine": {"name": "rules"},
        "cluster": {"processes": False, "workers": 1, "dashboard": False},
        "evidence": [f"gaia={catalog}"], **extra})
    outcome = runner.run_job(job, progress=False, echo=lambda s: None)
    assert outcome.status == "finished", outcome
    rows = read_verdicts(tmp_path / "cat").to_pylist()
    return outcome, {r["candidate_id"]: r for r in rows}


def _cands(fast):
    return [
        Cand("exact", 10.0, 5.0),
        Cand("fast", *fast),
        Cand("two", 50.0, -20.0),
        Cand("outside", 80.0, 40.0),
        Cand("negative", 150.0, -60.0),
        Cand("faint", 200.0, 10.0),
        Cand("nowhere", None, None),
        Cand("given", 300.0, 0.0, given_evidence={"gaia_source_id": 99, "gaia_parallax": 20.0,
                                                  "gaia_parallax_error": 0.2, "gaia_phot_g_mean_mag": 16.0}),
    ]


def test_a_run_with_gaia_evidence_fills_the_columns(tmp_path, monkeypatch, gaia_catalog):
    catalog, fast = gaia_catalog
    outcome, rows = _run(tmp_path, monkeypatch, _cands(fast), catalog)

    exact = rows["exact"]
    assert exact["gaia_source_id"] == 1 and exact["gaia_n_within"] == 1 and exact["gaia_sep_arcsec"] < 1e-3
    assert exact["gaia_abs_g"] == pytest.approx(10.0) and exact["gaia_abs_g_error"] == pytest.approx(0.0217147, 1e-5)
    assert exact["gaia_parallax"] == 10.0 and exact["gaia_bp_rp"] == 0.2 and exact["gaia_reason"] is None

    # moved 21.6" between 2016.0 and the spectrum: matched once propagated, the decoy 3" away is not counted
    moved = rows["fast"]
    assert moved["gaia_source_id"] == 2 and moved["gaia_sep_arcsec"] < 0.01 and moved["gaia_n_within"] == 1
    assert moved["gaia_pmra"] == 3000.0 and moved["gaia_abs_g"] == pytest.approx(14.0 + 5 * math.log10(0.5))

    two = rows["two"]
    assert two["gaia_source_id"] == 4 and two["gaia_n_within"] == 2
    assert two["gaia_sep_arcsec"] == pytest.approx(0.3 * math.cos(math.radians(20.0)), abs=1e-3)

    outside = rows["outside"]
    assert outside["gaia_source_id"] is None and outside["gaia_n_within"] == 0 and outside["gaia_abs_g"] is None
    assert "no gaia source within 1 arcsec" in outside["gaia_reason"]

    assert rows["negative"]["gaia_source_id"] == 7 and rows["negative"]["gaia_abs_g"] is None
    assert "parallax not positive" in rows["negative"]["gaia_reason"]
    assert rows["faint"]["gaia_abs_g"] is None and "parallax/error = 2.0 < 5" in rows["faint"]["gaia_reason"]

    nowhere = rows["nowhere"]
    assert nowhere["verdict"] != "ERROR" and nowhere["gaia_source_id"] is None
    assert nowhere["gaia_reason"].startswith("no ra/dec for the candidate") and nowhere["gaia_n_within"] is None

    given = rows["given"]  # carried by the list: used as given, M_G derived: 16 + 5 log10(0.2)
    assert given["gaia_source_id"] == 99 and given["gaia_abs_g"] == pytest.approx(16.0 + 5 * math.log10(0.2))

    ev = read_manifest(tmp_path / "cat", outcome.run_id)["evidence"]["gaia"]
    assert ev["matched_now"] == 6 and ev["given"] == 1 and ev["no_position"] == 1 and ev["epoch"] == 2016.0


def test_without_the_propagation_the_fast_source_would_be_missed(tmp_path, monkeypatch, gaia_catalog):
    """The same candidate with its spectrum taken at the catalog's epoch sits 21.6" away: no match."""
    catalog, fast = gaia_catalog
    _, rows = _run(tmp_path, monkeypatch, [Cand("fast", *fast, mjd=float((2016.0 - 2000.0) * 365.25 + 51544.5))],
                   catalog)
    assert rows["fast"]["gaia_source_id"] is None and rows["fast"]["gaia_n_within"] == 0


def test_the_match_is_cached_and_reused(tmp_path, monkeypatch, gaia_catalog):
    catalog, fast = gaia_catalog
    _run(tmp_path, monkeypatch, _cands(fast), catalog)
    # the next night: a new candidate beside the old ones; only it is matched
    cands = [*_cands(fast), Cand("exact-again", 10.0, 5.0)]
    outcome, rows = _run(tmp_path, monkeypatch, cands, catalog, run_id="night2")
    ev = read_manifest(tmp_path / "cat", "night2")["evidence"]["gaia"]
    assert ev["matched_now"] == 1 and ev["cached"] == 6
    assert rows["exact-again"]["gaia_source_id"] == 1


def test_bad_evidence_input_is_refused_before_anything_starts(tmp_path, monkeypatch, gaia_catalog):
    catalog, fast = gaia_catalog
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: _cands(fast))
    base = {"candidates": ["unused.csv"], "tasks": ["wd"], "out": str(tmp_path / "cat"), "engine": {"name": "rules"},
            "cluster": {"processes": False, "workers": 1, "dashboard": False}}
    not_hats = tmp_path / "plain"
    not_hats.mkdir()
    with pytest.raises(ConfigError, match="not a HATS catalog"):
        runner.run_job(job_from_dict({**base, "evidence": [f"gaia={not_hats}"]}), echo=lambda s: None)
    assert not (tmp_path / "cat").exists()
    with pytest.raises(ConfigError, match="radius_arcsec"):
        job_from_dict({**base, "evidence": [{"name": "gaia", "catalog": str(catalog), "radius_arcsec": 0}]})
    with pytest.raises(ConfigError, match="unknown evidence name 'wise'"):
        job_from_dict({**base, "evidence": [{"name": "wise", "catalog": str(catalog)}]})
    # a catalog without a column its source needs
    thin = tmp_path / "thin"
    write_hats(pd.DataFrame({"ra": [1.0], "dec": [2.0], "source_id": [1]}), thin)
    with pytest.raises(ConfigError, match="parallax"):
        runner.run_job(job_from_dict({**base, "evidence": [f"gaia={thin}"]}), echo=lambda s: None)


def test_other_evidence_names_keep_their_columns(tmp_path, monkeypatch, gaia_catalog):
    catalog, fast = gaia_catalog
    ztf = tmp_path / "ztf"
    write_hats(pd.DataFrame({"ra": [10.0], "dec": [5.0], "mean_mag_g": [17.25]}), ztf, "ztf")
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: [Cand("exact", 10.0, 5.0)])
    job = job_from_dict({
        "candidates": ["unused.csv"], "tasks": ["wd"], "out": str(tmp_path / "cat"), "engine": {"name": "rules"},
        "cluster": {"processes": False, "workers": 1, "dashboard": False},
        "evidence": [{"name": "ztf", "catalog": str(ztf), "columns": ["mean_mag_g"], "radius_arcsec": 2.0}]})
    runner.run_job(job, progress=False, echo=lambda s: None)
    import json

    row = read_verdicts(tmp_path / "cat").to_pylist()[0]
    extra = json.loads(row["evidence_extra"])
    assert extra["ztf_mean_mag_g"] == 17.25 and extra["ztf_n_within"] == 1 and row["gaia_source_id"] is None


def test_a_catalog_gone_mid_run_stops_the_run_and_it_resumes(tmp_path, monkeypatch, gaia_catalog):
    import shutil

    catalog, fast = gaia_catalog
    copy = tmp_path / "gaia-copy"
    shutil.copytree(catalog, copy)
    from spec_vetting.pipeline import evidence as ev_step

    real_match = ev_step.match

    def vanish_then_match(opened, frame):
        shutil.rmtree(copy)
        return real_match(opened, frame)

    monkeypatch.setattr(ev_step, "match", vanish_then_match)
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: _cands(fast))
    job = job_from_dict({
        "candidates": ["unused.csv"], "tasks": ["wd"], "out": str(tmp_path / "cat"), "engine": {"name": "rules"},
        "cluster": {"processes": False, "workers": 1, "dashboard": False}, "evidence": [f"gaia={copy}"]})
    with pytest.raises(RunFailedError, match="rerun the same command"):
        runner.run_job(job, progress=False, echo=lambda s: None)
    shutil.copytree(catalog, copy)
    monkeypatch.setattr(ev_step, "match", real_match)
    outcome = runner.run_job(job, progress=False, echo=lambda s: None)
    assert outcome.status == "finished" and outcome.resumed
    rows = {r["candidate_id"]: r for r in read_verdicts(tmp_path / "cat").to_pylist()}
    assert rows["exact"]["gaia_source_id"] == 1 and len(rows) == 8


def test_cli_evidence_errors_exit_2(tmp_path):
    from click.testing import CliRunner

    from spec_vetting.cli.run import run as run_cmd

    (tmp_path / "list.csv").write_text("path,ra,dec\nx.fits,1,2\n")
    r = CliRunner().invoke(run_cmd, ["--candidates", str(tmp_path / "list.csv"), "--task", "wd", "--engine", "rules",
                                     "--out", str(tmp_path / "cat"), "--evidence", f"gaia={tmp_path / 'nothing'}"])
    assert r.exit_code == 2 and "no such path" in r.output, r.output
    r = CliRunner().invoke(run_cmd, ["--candidates", str(tmp_path / "list.csv"), "--task", "wd", "--engine", "rules",
                                     "--out", str(tmp_path / "cat"), "--evidence", "gaia"])
    assert r.exit_code == 2 and "NAME=CATALOG" in r.output, r.output
    assert not (tmp_path / "cat").exists()


def test_make_examples_gaia_and_a_run_from_the_csv_list(tmp_path):
    """`make demo`'s path: make-examples --gaia, then `spec-vet run --evidence gaia=` on the CSV list (its ra, dec and
    mjd columns read by the real list reader); every example matches its own source, the fast white dwarf
    included, and M_G is the one the fixture put there."""
    from click.testing import CliRunner

    from spec_vetting.cli import main
    from spec_vetting.synthetic.example_evidence import FAST_PM, KIND_CMD
    from spec_vetting.synthetic.examples import plan_examples

    ex = tmp_path / "ex"
    r = CliRunner().invoke(main, ["make-examples", str(ex), "--n", "10", "--seed", "1", "--gaia"])
    assert r.exit_code == 0, r.output
    listed = pd.read_csv(ex / "candidates-gaia.csv")
    assert listed[["ra", "dec", "mjd"]].notna().all().all() and len(listed) == 10
    r = CliRunner().invoke(main, ["run", "--candidates", str(ex / "candidates-gaia.csv"), "--out", str(tmp_path / "c"),
                                  "--engine", "rules", "--threads", "--workers", "1", "--no-dashboard",
                                  "--no-progress", "--evidence", f"gaia={ex / 'gaia'}"])
    assert r.exit_code == 0, r.output
    rows = read_verdicts(tmp_path / "c").to_pandas().set_index("candidate_id")
    kinds = [item["kind"] for item in plan_examples(10, 1)]
    for (_, entry), kind in zip(listed.iterrows(), kinds, strict=True):
        row = rows.loc[entry["candidate_id"]]
        assert row["gaia_n_within"] == 1 and row["gaia_sep_arcsec"] < 0.01
        if KIND_CMD[kind] is not None:
            assert row["gaia_abs_g"] == pytest.approx(KIND_CMD[kind][0], abs=1e-6)
    assert (rows["gaia_pmra"] == FAST_PM[0]).sum() == 1  # the fast one is there, and matched


def test_evidence_prompt_appends_one_sentence_only_when_asked(tmp_path, monkeypatch, gaia_catalog):
    import asyncio

    from spec_vetting.engines.scripted import ScriptedEngine
    from spec_vetting.inspect.loop import run_inspection
    from spec_vetting.inspect.tasks import get_task
    from spec_vetting.pipeline.shard import with_evidence_sentence
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.types import InspectionContext, Sampling

    ev = {"gaia_source_id": 7, "gaia_parallax": 5.0, "gaia_parallax_error": 0.05, "gaia_abs_g": 9.0,
          "gaia_abs_g_error": 0.0217, "gaia_bp_rp": 2.8, "gaia_pmra": 30.0, "gaia_pmdec": 40.0}
    task = get_task("gm")
    asked = with_evidence_sentence(task, ev)
    sentence = ("Gaia DR3: parallax 5.00 ± 0.05 mas, absolute G magnitude 9.00 ± 0.02, BP-RP 2.80, proper motion "
                "50.0 mas/yr.")
    assert asked.prompt == f"{task.prompt} {sentence}" and asked.version == f"{task.version}+evidence1"
    assert with_evidence_sentence(task, {"gaia_reason": "no ra/dec for the candidate"}) is task
    engine = ScriptedEngine(replies=["<answer>\\boxed{NO} a dwarf</answer>"])
    sp = make_spectrum("m_dwarf", seed=1)
    asyncio.run(run_inspection(InspectionContext("c", "gm", spectrum=sp, evidence=ev), asked, engine,
                               sampling=Sampling()))
    user_text = next(m.text for m in engine.calls[0].messages if m.role == "user")
    assert user_text.endswith(sentence)

    # in a run: off by default (the trained text), on when asked, and the manifest says which
    catalog, fast = gaia_catalog
    outcome, rows = _run(tmp_path, monkeypatch, [Cand("exact", 10.0, 5.0)], catalog)
    assert not rows["exact"]["prompt_version"].endswith("+evidence1")
    assert read_manifest(tmp_path / "cat", outcome.run_id)["evidence_prompt"] is False
    _run(tmp_path, monkeypatch, [Cand("exact", 10.0, 5.0)], catalog, evidence_prompt=True, run_id="with-sentence")
    versions = {r["run_id"]: r["prompt_version"] for r in read_verdicts(tmp_path / "cat").to_pylist()}
    assert versions["with-sentence"] == versions[outcome.run_id] + "+evidence1"
    assert read_manifest(tmp_path / "cat", "with-sentence")["evidence_prompt"] is True


def test_matches_across_partition_borders_come_through_the_margin(tmp_path):
    """Every source of a catalog cut into many partitions, looked for 0.5" away in a random direction: each is found,
    the ones near a partition border through the margin cache, or without a margin through the search beyond it
    (which then has cones to search: the test sees the borders at all)."""
    import numpy as np

    from spec_vetting.evidence.crossmatch import match, open_catalog
    from spec_vetting.evidence.sources import EvidenceSource
    from spec_vetting.synthetic.hats import gaia_table

    table = gaia_table(6000, seed=4, ra_range=(30.0, 32.0), dec_range=(10.0, 12.0))
    table[["pmra", "pmdec"]] = 0.0
    rng = np.random.default_rng(5)
    angle = rng.uniform(0, 2 * np.pi, len(table))
    cands = pd.DataFrame({
        "key": np.arange(len(table)),
        "ra": table["ra"] + 0.5 / 3600 * np.cos(angle) / np.cos(np.radians(table["dec"])),
        "dec": table["dec"] + 0.5 / 3600 * np.sin(angle), "jyear": np.nan})
    found = {}
    for name, margin in (("with", 10.0), ("without", None)):
        write_hats(table, tmp_path / name, "gaia", margin_arcsec=margin, partition_rows=300, highest_order=9)
        opened = open_catalog(EvidenceSource(name="gaia", catalog=str(tmp_path / name)))
        assert len(opened.catalog.get_healpix_pixels()) > 8  # many partitions, many borders
        found[name] = match(opened, cands)
    # the oracle: astropy's nearest neighbour over the whole table, no partitions
    from astropy import units as u
    from astropy.coordinates import SkyCoord, match_coordinates_sky

    idx, sep, _ = match_coordinates_sky(SkyCoord(cands["ra"].to_numpy() * u.deg, cands["dec"].to_numpy() * u.deg),
                                        SkyCoord(table["ra"].to_numpy() * u.deg, table["dec"].to_numpy() * u.deg))
    assert (sep.arcsec <= 0.5 + 1e-6).all()
    for name in ("with", "without"):
        got = found[name].frame.sort_index()
        assert len(got) == len(table)
        assert (got["source_id"].to_numpy() == table["source_id"].to_numpy()[idx]).all()
        assert np.allclose(got["sep_arcsec"].to_numpy(), sep.arcsec, atol=1e-4)
    assert found["with"].beyond_margin == 0 and found["without"].beyond_margin > 0


def test_gaia_columns_of_the_list_are_used_without_any_catalog(tmp_path, monkeypatch):
    given = {"gaia_source_id": 99, "gaia_parallax": 20.0, "gaia_parallax_error": 0.2, "gaia_phot_g_mean_mag": 16.0,
             "gaia_bp_rp": 2.7}
    monkeypatch.setattr(runner, "load_all_candidates",
                        lambda sources: [Cand("given", 300.0, 0.0, given_evidence=given), Cand("plain", 1.0, 1.0)])
    job = job_from_dict({
        "candidates": ["unused.csv"], "tasks": ["gm"], "out": str(tmp_path / "cat"), "engine": {"name": "rules"},
        "cluster": {"processes": False, "workers": 1, "dashboard": False}})
    runner.run_job(job, progress=False, echo=lambda s: None)
    rows = {r["candidate_id"]: r for r in read_verdicts(tmp_path / "cat").to_pylist()}
    # M_G = 16 + 5 log10(20 / 100); error (5 / ln 10) * 0.2 / 20
    assert rows["given"]["gaia_abs_g"] == pytest.approx(16.0 + 5 * math.log10(0.2))
    assert rows["given"]["gaia_abs_g_error"] == pytest.approx(5 / math.log(10) * 0.01)
    assert rows["given"]["gaia_source_id"] == 99 and rows["plain"]["gaia_source_id"] is None
    assert rows["plain"]["gaia_reason"] is None  # no evidence asked, none given: the columns stay null
