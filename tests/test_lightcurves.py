"""Light curves as evidence (issue 38): per-band summaries, the match with a nested HATS catalog, bad input.

Oracles: the summaries are recomputed here with plain numpy (and a Python loop for the episodes) on the same
epochs the fixture wrote, and checked against values known by construction (a sinusoid's 5-95 % range, the number
of outbursts placed on observed nights, a flagged spike that must not count). The catalogs are written in a
temporary folder with nested-pandas + lsdb's ``to_hats``; nothing is downloaded.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from spec_vetting.errors import ConfigError
from spec_vetting.evidence.lightcurves import SummaryRules, summarise_band
from spec_vetting.evidence.sources import EvidenceSource

ARCSEC = 1 / 3600


def oracle(t, m, e, flags, *, min_epochs=5, outburst=1.0) -> dict:
    """The summary worked out independently: plain numpy on the good epochs, a loop for the episodes."""
    t, m, e = (np.asarray(a, dtype=float) for a in (t, m, e))
    flags = np.zeros(t.size, int) if flags is None else np.asarray(flags)
    valid = np.isfinite(t) & np.isfinite(m) & np.isfinite(e) & (e > 0)
    good = valid & (flags == 0)
    out = {"n_epochs": t.size, "n_invalid": int((~valid).sum()), "n_good": int(good.sum())}
    if good.sum() < min_epochs:
        return out
    idx = np.argsort(t[good])
    t, m, e = t[good][idx], m[good][idx], e[good][idx]
    n = t.size
    med = np.median(m)
    mean = np.average(m, weights=e ** -2)
    amp = np.percentile(m, 95) - np.percentile(m, 5)
    episodes, inside = 0, False
    for mi, ei in zip(m, e, strict=True):
        now = (med - mi) - outburst >= 3 * ei
        if now and not inside:
            episodes += 1
        inside = now
    i = np.argmin(m)
    out.update(span_days=t[-1] - t[0], median_mag=med, amplitude=amp,
               amplitude_error=math.sqrt(2) * np.median(e),
               amplitude_sigma=(amp - 3.289707253902945 * np.median(e)) / (math.sqrt(2) * np.median(e)),
               chi2_red=np.sum((m - mean) ** 2 / e ** 2) / (n - 1), chi2_red_error=math.sqrt(2 / (n - 1)),
               von_neumann=np.sum(np.diff(m) ** 2) / (n - 1) / np.var(m, ddof=1),
               max_brightening_mag=med - m[i], max_brightening_error=e[i],
               max_brightening_sigma=np.max((med - m) / e), n_episodes=episodes)
    return out


def check(got: dict, want: dict):
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def _epochs(rng, n=300, span=1400.0):
    return 58200.0 + np.sort(rng.uniform(0, span, n))


def test_steady_star_summary_matches_numpy():
    rng = np.random.default_rng(1)
    t = _epochs(rng)
    e = rng.uniform(0.01, 0.03, t.size)
    m = 16.0 + rng.normal(0, 1, t.size) * e
    got = summarise_band(t, m, e, np.zeros(t.size, int))
    check(got, oracle(t, m, e, None))
    # a constant star with right errors: chi2_red about 1, amplitude about what the errors give, no outburst
    assert abs(got["chi2_red"] - 1) < 4 * got["chi2_red_error"]
    assert abs(got["amplitude_sigma"]) < 3 and got["n_episodes"] == 0 and got["reason"] is None


def test_mira_amplitude_is_the_sinusoids_range():
    rng = np.random.default_rng(2)
    t = 58200.0 + np.arange(0, 1400.0, 2.0)  # dense: every phase sampled
    m = 12.0 + 1.5 * np.sin(2 * np.pi * t / 330.0) + rng.normal(0, 0.02, t.size)
    e = np.full(t.size, 0.02)
    got = summarise_band(t, m, e)
    check(got, oracle(t, m, e, None))
    # 5-95 % range of A sin: 2 A sin(0.45 pi) = 2.9630 for A = 1.5 (noise 0.02 widens it by well under 0.02)
    assert got["amplitude"] == pytest.approx(2 * 1.5 * math.sin(0.45 * math.pi), abs=0.03)
    assert got["von_neumann"] < 0.05  # slow against a 2-day cadence
    # one episode per maximum: sin = -1 at t = 330 (k + 3/4), i.e. MJD 58327.5, 58657.5, 58987.5, 59317.5 in
    # 58200-59598 (the next, 59647.5, has its > 1.06 mag part from 59606 on: after the last epoch)
    assert got["n_episodes"] == 4


def test_dwarf_nova_outbursts_are_counted_and_a_flagged_spike_is_not():
    rng = np.random.default_rng(3)
    t = 58200.0 + np.arange(0, 1000.0, 3.0)
    m = np.full(t.size, 18.0)
    for start in (58302.0, 58602.0):  # two outbursts of 3 mag, 6 days each: two or three epochs apiece
        m[(t >= start) & (t < start + 6)] -= 3.0
    m += rng.normal(0, 0.05, t.size)
    e = np.full(t.size, 0.05)
    flags = np.zeros(t.size, int)
    flags[100] = 4  # a flagged 5-mag spike far from the outbursts
    m[100] = 13.0
    got = summarise_band(t, m, e, flags)
    check(got, oracle(t, m, e, flags))
    assert got["n_episodes"] == 2 and got["n_good"] == t.size - 1
    assert got["max_brightening_mag"] == pytest.approx(3.0, abs=0.25)
    assert got["max_brightening_sigma"] > 40


def test_invalid_errors_are_counted_and_never_summarised():
    rng = np.random.default_rng(4)
    t = _epochs(rng, 40)
    m = 15.0 + rng.normal(0, 0.02, t.size)
    e = np.full(t.size, 0.02)
    e[3], e[7], e[9] = np.nan, -0.01, 0.0
    m[11] = np.nan
    got = summarise_band(t, m, e)
    assert got["n_invalid"] == 4 and got["n_good"] == 36
    check(got, oracle(t, m, e, None))


@pytest.mark.parametrize("n, flagged, reason", [
    (3, 0, "too few good epochs (3 < 5)"),
    (8, 8, "all 8 epochs flagged or without a valid magnitude/error"),
    (0, 0, "no epochs"),
])
def test_sparse_and_flagged_curves_give_a_reason_not_a_number(n, flagged, reason):
    t = 58200.0 + np.arange(n, dtype=float)
    flags = np.zeros(n, int)
    flags[:flagged] = 1
    got = summarise_band(t, np.full(n, 15.0), np.full(n, 0.02), flags)
    assert got["reason"] == reason and got["amplitude"] is None and got["median_mag"] is None
    # ZTF's unusable-epoch bit only: the 1-bit flags no longer drop anything
    if flagged and n >= 5:
        assert summarise_band(t, np.full(n, 15.0), np.full(n, 0.02), flags,
                              SummaryRules(bad_flags=32768))["n_good"] == n


# --------------------------------------------------------------------------------------------------- the match

pytest.importorskip("lsdb")


def _curves():
    """The fixture catalog: (Curve, what it is) at known places."""
    from spec_vetting.synthetic.lightcurves import Curve

    rng = np.random.default_rng(10)
    t = 58200.0 + np.sort(rng.uniform(0, 1500, 250))
    e = np.full(t.size, 0.03)
    steady_g = 16.0 + rng.normal(0, 0.03, t.size)
    steady_r = 15.6 + rng.normal(0, 0.03, t.size)
    dn = np.full(t.size, 17.5) + rng.normal(0, 0.03, t.size)
    dn[40:43] -= 2.5
    dn[150:152] -= 3.0
    mira = 11.0 + 1.5 * np.sin(2 * np.pi * t / 300.0) + rng.normal(0, 0.03, t.size)
    flags = np.zeros(t.size, int)
    flags[::2] = 1  # half of a curve flagged
    t_bad = t[:20].copy()
    e_bad = np.full(20, 0.03)
    e_bad[:4] = [np.nan, -0.1, 0.0, np.nan]
    return [
        (Curve(10.0, 5.0, "g", t, steady_g, e), "steady g"),
        (Curve(10.0 + 0.2 * ARCSEC, 5.0, "r", t, steady_r, e), "steady r"),
        # another star 0.7" away in g: farther than the steady star's g row, never mixed in
        (Curve(10.0, 5.0 + 0.7 * ARCSEC, "g", t, np.full(t.size, 12.0), e), "neighbour g"),
        (Curve(40.0, -10.0, "r", t, dn, e), "dwarf nova r"),
        (Curve(80.0, 30.0, "r", t, mira, e, flags), "mira r, half flagged"),
        (Curve(120.0, 60.0, "g", t_bad, 15.0 + rng.normal(0, 0.03, 20), e_bad), "sparse with bad errors"),
        (Curve(200.0, -30.0, "g", t[:3], np.full(3, 15.0), np.full(3, 0.03)), "three epochs"),
    ]


@pytest.fixture(scope="module")
def lc_catalog(tmp_path_factory):
    from spec_vetting.synthetic.lightcurves import nested_table, write_light_curves

    curves = _curves()
    folder = tmp_path_factory.mktemp("lc") / "ztf"
    write_light_curves(nested_table([c for c, _ in curves]), folder)
    return folder, curves


CANDIDATES = pd.DataFrame({"key": [0, 1, 2, 3, 4, 5, 6],
                           "ra": [10.0, 40.0, 80.0, 120.0, 200.0, 300.0, 40.0 + 0.5 * ARCSEC],
                           "dec": [5.0, -10.0, 30.0, 60.0, -30.0, 0.0, -10.0]})


def _match(folder, **settings):
    from spec_vetting.evidence.lightcurve_match import match_light_curves, open_light_curves

    entry = {"name": "ztf", "catalog": str(folder), **settings}
    return match_light_curves(open_light_curves(EvidenceSource.model_validate(entry)), CANDIDATES)


def test_match_summarises_each_band_of_the_nearest_object(lc_catalog):
    folder, curves = lc_catalog
    got = _match(folder)
    by = {what: c for c, what in curves}
    assert set(got) == {0, 1, 2, 3, 4, 6}  # candidate 5 has nothing within 1"
    steady = got[0]["record"]
    assert steady["ztf_kind"] == "light_curve" and steady["ztf_n_within"] == 3
    for band, what in (("g", "steady g"), ("r", "steady r")):
        c = by[what]
        want = oracle(c.t, c.mag, c.err, c.flags)
        check({k: steady[f"ztf_{band}_{k}"] for k in want}, want)
    assert steady["ztf_i_reason"] == "no epochs in this band" and steady["ztf_i_amplitude"] is None
    dn = got[1]["record"]
    c = by["dwarf nova r"]
    check({k: dn[f"ztf_r_{k}"] for k in oracle(c.t, c.mag, c.err, None)}, oracle(c.t, c.mag, c.err, None))
    assert dn["ztf_r_n_episodes"] == 2 and dn["ztf_r_max_brightening_mag"] == pytest.approx(3.0, abs=0.15)
    assert got[6]["record"]["ztf_r_median_mag"] == dn["ztf_r_median_mag"]  # 0.5" away: the same object
    mira = got[2]["record"]
    c = by["mira r, half flagged"]
    want = oracle(c.t, c.mag, c.err, c.flags)
    assert want["n_good"] == 125
    check({k: mira[f"ztf_r_{k}"] for k in want}, want)
    bad = got[3]["record"]
    c = by["sparse with bad errors"]
    assert bad["ztf_g_n_invalid"] == 4 and bad["ztf_g_n_good"] == 16
    check({k: bad[f"ztf_g_{k}"] for k in oracle(c.t, c.mag, c.err, None)}, oracle(c.t, c.mag, c.err, None))
    assert got[4]["record"]["ztf_g_reason"] == "too few good epochs (3 < 5)"
    # the page's points: the good epochs in time order
    pts = got[2]["points"]["r"]
    assert len(pts[0]) == 125 and pts[0] == sorted(pts[0])


def test_bad_catalogs_and_settings_are_refused_before_the_run(lc_catalog, tmp_path):
    from spec_vetting.evidence.lightcurve_match import open_light_curves
    from spec_vetting.synthetic.hats import write_hats

    folder, _ = lc_catalog
    plain = write_hats(pd.DataFrame({"ra": [1.0], "dec": [2.0], "mag": [15.0]}), tmp_path / "plain", "plain")
    cases = [
        ({"catalog": str(plain)}, "no nested light-curve column 'lightcurve'"),
        ({"light_curve": {"time": "mjd"}}, "no field\\(s\\) mjd"),
        ({"light_curve": {"band": "band"}}, "band column 'band'"),
        ({"light_curve": {"bands": ["z"]}}, "band\\(s\\) z are not among"),
        ({"radius_arcsec": 60.0}, "wider than the catalog's margin"),
    ]
    for extra, message in cases:
        entry = {"name": "ztf", "catalog": str(folder), **extra}
        with pytest.raises(ConfigError, match=message):
            open_light_curves(EvidenceSource.model_validate(entry))
    with pytest.raises(ValueError, match="light_curve settings, not columns"):
        EvidenceSource.model_validate({"name": "lc", "catalog": "x", "columns": ["a"], "light_curve": {}})


def test_cli_refuses_a_catalog_without_light_curves_with_exit_2(tmp_path):
    from click.testing import CliRunner

    from spec_vetting.cli.run import run as run_cmd
    from spec_vetting.synthetic.hats import write_hats

    plain = write_hats(pd.DataFrame({"ra": [1.0], "dec": [2.0], "mag": [15.0]}), tmp_path / "plain", "plain")
    (tmp_path / "list.csv").write_text("path,ra,dec\nx.fits,1,2\n")
    r = CliRunner().invoke(run_cmd, ["--candidates", str(tmp_path / "list.csv"), "--task", "cv", "--engine", "rules",
                                     "--out", str(tmp_path / "cat"), "--evidence", f"ztf={plain}"])
    assert r.exit_code == 2 and "no nested light-curve column 'lightcurve'" in r.output, r.output
    assert "Traceback" not in r.output and not (tmp_path / "cat").exists()


def test_any_name_with_light_curve_settings_and_a_nested_band(tmp_path):
    """A catalog joined from objects and detections (band in the nested table, as text) under another name."""
    import nested_pandas as npd

    from spec_vetting.evidence.lightcurve_match import match_light_curves, open_light_curves
    from spec_vetting.synthetic.lightcurves import write_light_curves

    rng = np.random.default_rng(5)
    t = np.sort(rng.uniform(59000, 59800, 60))
    det = pd.DataFrame({"mjd": t, "band": np.where(np.arange(60) % 2, "r", "g"), "psfmag": 14 + rng.normal(0, .01, 60),
                        "psfmagerr": np.full(60, 0.01)}, index=np.zeros(60, int))
    nf = npd.NestedFrame(pd.DataFrame({"ra": [30.0], "dec": [10.0]})).join_nested(det, "detections")
    write_light_curves(nf, tmp_path / "lc", ra_column="ra", dec_column="dec")
    src = EvidenceSource.model_validate({"name": "ps", "catalog": str(tmp_path / "lc"), "light_curve": {
        "nested": "detections", "time": "mjd", "mag": "psfmag", "error": "psfmagerr", "flags": None, "band": "band",
        "band_names": {}, "bands": ["g", "r"]}})
    got = match_light_curves(open_light_curves(src), pd.DataFrame({"key": [0], "ra": [30.0], "dec": [10.0]}))
    rec = got[0]["record"]
    for band, sel in (("g", np.arange(60) % 2 == 0), ("r", np.arange(60) % 2 == 1)):
        want = oracle(t[sel], det["psfmag"].to_numpy()[sel], det["psfmagerr"].to_numpy()[sel], None)
        check({k: rec[f"ps_{band}_{k}"] for k in want}, want)


def test_a_run_with_light_curves_fills_rows_caches_and_keeps_points(lc_catalog, tmp_path, monkeypatch):
    from test_evidence_crossmatch import Cand

    from spec_vetting.catalog.listing import read_manifest
    from spec_vetting.catalog.read import read_verdicts
    from spec_vetting.evidence.lightcurve_points import read_points
    from spec_vetting.pipeline import job_from_dict, runner

    folder, curves = lc_catalog
    cands = [Cand("steady", 10.0, 5.0), Cand("dn", 40.0, -10.0), Cand("nothing", 300.0, 0.0),
             Cand("nopos", None, None)]
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: cands)

    def job(run_id, task):
        return job_from_dict({
            "candidates": ["unused.csv"], "tasks": [task], "out": str(tmp_path / "cat"), "engine": {"name": "rules"},
            "cluster": {"processes": False, "workers": 1, "dashboard": False}, "evidence": [f"ztf={folder}"],
            "run_id": run_id})

    assert runner.run_job(job("night1", "cv"), progress=False, echo=lambda s: None).status == "finished"
    rows = {r["candidate_id"]: r for r in read_verdicts(tmp_path / "cat").to_pylist()}
    extra = {k: json.loads(r["evidence_extra"]) for k, r in rows.items() if r["evidence_extra"]}
    by = {what: c for c, what in curves}
    c = by["dwarf nova r"]
    want = oracle(c.t, c.mag, c.err, None)
    check({k: extra["dn"][f"ztf_r_{k}"] for k in want}, want)
    assert extra["nothing"]["ztf_reason"] == "no ztf light curve within 1 arcsec"
    assert extra["nothing"]["ztf_r_reason"] == "no ztf light curve within 1 arcsec"
    assert extra["nopos"]["ztf_reason"].startswith("no ra/dec for the candidate")
    assert set(read_points(tmp_path / "cat", ["steady", "dn", "nothing"])) == {"steady", "dn"}
    ev = read_manifest(tmp_path / "cat", "night1")["evidence"]["ztf"]
    assert ev["matched_now"] == 3 and ev["with_source"] == 2
    # a later night under the same root: the cache answers, the catalog is not matched again
    runner.run_job(job("night2", "wd"), progress=False, echo=lambda s: None)
    ev = read_manifest(tmp_path / "cat", "night2")["evidence"]["ztf"]
    assert ev["cached"] == 3 and ev["matched_now"] == 0


def test_make_examples_light_curves_match_every_example_with_its_kind(tmp_path):
    """`make demo`'s light curves: every example has g and r rows at its list position; Mira-like curves for the
    giants, outbursts for the CVs but one steady CV, steady curves elsewhere, sparse ones for QSOs and galaxies."""
    from click.testing import CliRunner

    from spec_vetting.cli import main
    from spec_vetting.evidence.lightcurve_match import match_light_curves, open_light_curves
    from spec_vetting.synthetic.example_light_curves import CV_KINDS, LPV_KINDS, SPARSE_KINDS
    from spec_vetting.synthetic.examples import plan_examples

    ex = tmp_path / "ex"
    r = CliRunner().invoke(main, ["make-examples", str(ex), "--n", "16", "--seed", "2", "--light-curves"])
    assert r.exit_code == 0, r.output
    listed = pd.read_csv(ex / "candidates-gaia.csv")
    marker = json.loads((ex / ".spec-vet-examples.json").read_text())
    assert any(f.startswith("ztf/") for f in marker["files"])
    frame = pd.DataFrame({"key": np.arange(len(listed)), "ra": listed["ra"], "dec": listed["dec"]})
    got = match_light_curves(open_light_curves(EvidenceSource.model_validate(f"ztf={ex / 'ztf'}")), frame)
    kinds = [item["kind"] for item in plan_examples(16, 2)]
    steady_cvs = 0
    for i, kind in enumerate(kinds):
        rec = got[i]["record"]
        assert rec["ztf_n_within"] == 2
        if kind in SPARSE_KINDS:
            assert rec["ztf_g_reason"] == "too few good epochs (3 < 5)"
        elif kind in LPV_KINDS:
            assert rec["ztf_r_amplitude"] > 1.0 and rec["ztf_r_von_neumann"] < 0.5
        elif kind in CV_KINDS:
            steady_cvs += rec["ztf_r_n_episodes"] == 0
        else:
            assert abs(rec["ztf_r_chi2_red"] - 1) < 5 * rec["ztf_r_chi2_red_error"], kind
    assert steady_cvs == (1 if "cv" in kinds else 0)


def test_an_object_and_a_detection_catalog_joined_by_lsdb(tmp_path):
    """Objects (one row per object and filter) and detections (one row per epoch) as two HATS catalogs, nested by
    lsdb's join_nested on objectid; a detection catalog without an error column is refused."""
    from spec_vetting.evidence.lightcurve_match import match_light_curves, open_light_curves
    from spec_vetting.synthetic.hats import write_hats
    from spec_vetting.synthetic.lightcurves import write_light_curves

    rng = np.random.default_rng(8)
    objects = pd.DataFrame({"objectid": [11, 12, 13], "objra": [60.0, 60.0, 61.0], "objdec": [20.0, 20.0, 21.0],
                            "filterid": [1, 2, 2]})
    n = 80
    t = np.sort(rng.uniform(58300, 59800, n))
    dets = []
    for oid, ra, dec, m0 in ((11, 60.0, 20.0, 16.0), (12, 60.0, 20.0, 15.5), (13, 61.0, 21.0, 14.0)):
        mag = m0 + rng.normal(0, 0.02, n) - np.where(np.arange(n) % 17 == 3, 2.0, 0.0) * (oid == 12)
        dets.append(pd.DataFrame({"objectid": oid, "ra": ra, "dec": dec, "hmjd": t, "mag": mag,
                                  "magerr": np.full(n, 0.02), "catflags": np.where(np.arange(n) == 5, 1, 0)}))
    det = pd.concat(dets, ignore_index=True)
    write_light_curves(objects, tmp_path / "obj")
    write_hats(det, tmp_path / "det", "det", margin_arcsec=30.0)
    settings = {"detections": str(tmp_path / "det")}
    src = EvidenceSource.model_validate({"name": "ztf", "catalog": str(tmp_path / "obj"), "light_curve": settings})
    got = match_light_curves(open_light_curves(src), pd.DataFrame({"key": [0], "ra": [60.0], "dec": [20.0]}))
    rec = got[0]["record"]
    assert rec["ztf_n_within"] == 2
    for band, oid in (("g", 11), ("r", 12)):
        d = det[det["objectid"] == oid]
        want = oracle(d["hmjd"], d["mag"], d["magerr"], d["catflags"])
        check({k: rec[f"ztf_{band}_{k}"] for k in want}, want)
    assert rec["ztf_r_n_episodes"] == 5  # epochs 3, 20, 37, 54, 71 each 2 mag bright, none adjacent
    write_hats(det.drop(columns=["magerr"]), tmp_path / "det2", "det2", margin_arcsec=30.0)
    bad = EvidenceSource.model_validate({"name": "ztf", "catalog": str(tmp_path / "obj"),
                                         "light_curve": {"detections": str(tmp_path / "det2")}})
    with pytest.raises(ConfigError, match="have no column\\(s\\) magerr"):
        open_light_curves(bad)
