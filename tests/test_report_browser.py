"""The review page in headless Chromium: loads from disk, lists every id, shows images, filters, exports, and keeps
an XSS payload inert. Uses the page's own ``#selftest`` mode and ``chromium --dump-dom`` (no Python browser driver).
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
import subprocess

import pytest
from test_eval_support import XSS_IMG, XSS_SCRIPT, turn_rows, verdict_row, write_catalog

from spec_vetting.catalog.run_data import read_run
from spec_vetting.report.page import write_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install chromium; `make setup` and CI install it)"
)


def selftest_result(text: str) -> dict:
    m = re.search(r'<pre id="selftest-result">(.*?)</pre>', text, re.S)
    assert m, "the page's selftest did not finish:\n" + text[-3000:]
    return json.loads(html.unescape(m.group(1)))


def dump_dom(page_path, profile_dir, fragment="#selftest") -> str:
    """The page's DOM after it ran; a selftest whose result is not in the DOM yet (image decoding can outlast the
    virtual-time budget on a loaded machine) is given one more run."""
    text = _dump_dom(page_path, profile_dir, fragment)
    if fragment == "#selftest" and 'id="selftest-result"' not in text:
        text = _dump_dom(page_path, profile_dir, fragment)
    return text


def _dump_dom(page_path, profile_dir, fragment) -> str:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={profile_dir}", "--virtual-time-budget=30000", "--dump-dom",
        page_path.resolve().as_uri() + fragment,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def dom(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    ids = [("cv-001", "cv", "YES", "YES", 0.95), ("cv-002", "cv", "NO", "YES", 0.55),
           ("wd <b>7</b>", "wd", "UNDECIDED", "NO", None), ("evil", "wd", "YES", "NO", 0.7)]
    v = [verdict_row(c, t, ver, label=lab, p_yes=p, justification=XSS_SCRIPT if c == "evil" else "fine")
         for c, t, ver, lab, p in ids]
    turns = [r for c, t, ver, _, _ in ids
             for r in turn_rows(c, t, ver if ver != "UNDECIDED" else "YES",
                                first_text=(XSS_IMG + XSS_SCRIPT) if c == "evil" else None)]
    root = write_catalog(tmp / "cat", v, turns)
    page = write_page(read_run(root), tmp / "out")
    text = dump_dom(page, tmp / "profile")
    m = re.search(r'<pre id="selftest-result">(.*?)</pre>', text, re.S)
    assert m, "the page's selftest did not finish:\n" + text[-3000:]
    return {"html": text, "result": json.loads(html.unescape(m.group(1))), "ids": [i[0] for i in ids]}


def test_every_candidate_id_is_listed(dom):
    assert sorted(dom["result"]["ids_visible"]) == sorted(dom["ids"])


def test_images_show(dom):
    widths = dom["result"]["image_widths"]
    assert len(widths) == 8  # full view + one zoom per candidate
    assert all(w > 0 for w in widths)


def test_task_filter(dom):
    r = dom["result"]
    assert r["filter_task"] == "cv" and r["filter_shown"] == r["filter_expected"] == 2


def test_export_csv(dom):
    from spec_vetting.catalog.review_schema import REVIEW_CSV_COLUMNS

    rows = list(csv.DictReader(io.StringIO(dom["result"]["csv"])))
    assert list(rows[0]) == list(REVIEW_CSV_COLUMNS)
    first, second = rows  # the selftest marks the first two listed candidates (sorted by task, id)
    assert (first["candidate_id"], first["decision"], first["label"]) == ("cv-001", "agree", "YES")
    assert first["comment"] == 'selftest, "quoted", comma; Broad absorption line quasar (BAL)'
    assert first["reviewer"] == "selftest" and (first["vi_quality"], first["vi_issues"]) == ("3", "S")
    assert first["run_id"] == "run-1" and first["reviewed_at"].startswith("20")
    assert (second["candidate_id"], second["decision"], second["label"]) == ("cv-002", "disagree", "YES")


def test_xss_payload_stays_inert_text(dom):
    text = dom["html"]
    assert dom["result"]["xss"] is None
    body = re.search(r"<body[^>]*>", text).group(0)
    assert "data-xss" not in body
    assert '<img src="x"' not in text and "<img src=x" not in text
    assert "&lt;img src=x onerror=" in text  # shown, escaped, as the model wrote it
    assert "&lt;/script&gt;&lt;script&gt;document.body" in text


def test_exported_csv_is_accepted_as_labels_by_eval_and_export(dom, tmp_path):
    from spec_vetting.catalog.labels import read_label_file

    path = tmp_path / "review-run-1.csv"
    path.write_text(dom["result"]["csv"], encoding="utf-8", newline="")
    # agree on a YES verdict -> YES; disagree on a NO verdict -> YES (what eval --labels and export sft read)
    assert read_label_file(path) == {("cv-001", "cv"): "YES", ("cv-002", "cv"): "YES"}


@pytest.fixture(scope="module")
def split_pages(tmp_path_factory):
    """The same kind of run written with two candidates per file: index.html and part-002.html."""
    from spec_vetting.report.page import write_pages

    tmp = tmp_path_factory.mktemp("split")
    ids = [("a1", "cv", "YES"), ("a2", "cv", "NO"), ("b1", "wd", "YES"), ("b2", "wd", "NO")]
    v = [verdict_row(c, t, ver, label="YES", p_yes=0.9) for c, t, ver in ids]
    root = write_catalog(tmp / "cat", v, [r for c, t, ver in ids for r in turn_rows(c, t, ver)])
    paths = write_pages(read_run(root), tmp / "out", per_file=2)
    assert [p.name for p in paths] == ["index.html", "part-002.html"]
    return tmp, paths


def test_split_page_lists_the_whole_run_and_shows_its_own_trajectories(split_pages):
    tmp, paths = split_pages
    text = dump_dom(paths[1], tmp / "profile-a")
    r = json.loads(html.unescape(re.search(r'<pre id="selftest-result">(.*?)</pre>', text, re.S).group(1)))
    assert r["ids_visible"] == ["a1", "a2", "b1", "b2"] and r["part"] == 1 and r["parts"] == 2
    assert r["details_here"] == ["b1", "b2"]
    assert len(r["image_widths"]) == 4 and all(w > 0 for w in r["image_widths"])  # this file's images show
    assert r["elsewhere"] == ["index.html#show=0", "index.html#show=1", None, None]  # a1, a2 open the first file
    assert r["filter_shown"] == r["filter_expected"] == 2  # the filter covers candidates of both files
    # the selftest decides on the candidate it shows (b1, here) and on the second listed (a2, in the other file):
    # the export covers both files
    assert [row.split(",")[0] for row in r["csv"].split("\r\n")[1:3]] == ["a2", "b1"]


def test_split_page_opens_at_the_candidate_asked_for(split_pages):
    tmp, paths = split_pages
    text = dump_dom(paths[1], tmp / "profile-b", fragment="#show=3")  # where a click on b2 in index.html lands
    detail = re.search(r'<div id="detail"><div class="candidate" data-candidate="([^"]+)"', text)
    assert detail and detail.group(1) == "b2"


# ------------------------------------------------------------------ the interactive spectrum, VI fields, round trip


@pytest.fixture(scope="module")
def spectrum_page(tmp_path_factory):
    from report_support import spectrum_catalog

    tmp = tmp_path_factory.mktemp("spectrum-page")
    root, items = spectrum_catalog(tmp)
    page = write_page(read_run(root), tmp / "out")
    first = selftest_result(dump_dom(page, tmp / "profile"))
    again = selftest_result(dump_dom(page, tmp / "profile"))  # the same browser profile: a reload
    return {"root": root, "items": items, "tmp": tmp, "first": first, "again": again}


def test_spectrum_plot_draws_and_every_candidate_gets_one(spectrum_page):
    r = spectrum_page["first"]
    assert r["plots"] == len(r["details_here"]) == len(spectrum_page["items"])
    assert r["image_widths"] == []  # no PNG embedded: every spectrum file reads
    assert r["plot"]["ink"] > 0.005 and r["plot"]["ink_after"] > 0.005  # the canvas is drawn on


def test_spectrum_plot_zoom_pan_reset_and_frames(spectrum_page):
    p = spectrum_page["first"]["plot"]
    lo, hi, frame, z = p["initial"]
    assert frame == "rest" and 3000 < lo < 4000 and 8500 < hi < 10500
    width = hi - lo
    wlo, whi = p["after_wheel"][:2]
    assert whi - wlo == pytest.approx(0.8 * width, rel=1e-3)  # wheel: zoom in at the cursor
    dlo, dhi = p["after_drag"][:2]
    # drag from x = 100 to 300 px: zoom to that selection (plot area: 62 px from the left, 12 px from the right)
    scale = (whi - wlo) / (p["width"] - 74)
    assert dlo == pytest.approx(wlo + 38 * scale, abs=0.05) and dhi == pytest.approx(wlo + 238 * scale, abs=0.05)
    plo, phi = p["after_pan"][:2]
    assert phi - plo == pytest.approx(dhi - dlo, abs=0.05) and plo > dlo  # shift+drag: pan, same width
    assert p["after_reset"] == p["initial"]  # double-click
    olo, _, oframe, _ = p["observed"]
    assert oframe == "obs" and olo == pytest.approx(lo * (1 + z), abs=0.02)
    zlo, _, zframe, zval = p["rest_z05"]
    assert zframe == "rest" and zval == 0.5 and zlo == pytest.approx(olo / 1.5, abs=0.02)
    assert p["vi_z_before"] == "" and p["vi_z_after"] == "0.5"  # looking at z = 0.5 sets no VI z until asked
    # the agent's window (rest frame of the run's z) shown in the rest frame of the reviewer's z = 0.5
    wlo, whi = p["window"][:2]
    win_lo, win_hi = p["windows"][0]
    run_z = -0.0001450149058217
    centre = (win_lo + win_hi) / 2 * (1 + run_z) / 1.5
    assert (wlo + whi) / 2 == pytest.approx(centre, abs=0.05)


def test_ids_shown_as_text_and_decision_saved_as_the_reviewer_clicks(spectrum_page):
    r = spectrum_page["first"]
    assert r["shown_ids"]["ra"] == "126.5024" and r["shown_ids"]["redshift"] == "-0.000145"
    stored = r["stored"]
    assert stored["decision"] == "agree" and stored["vi_quality"] == "3" and stored["vi_issues"] == "S"
    assert stored["comment"].startswith('selftest, "quoted", comma') and stored["reviewer"] == "selftest"
    assert stored["vi_z"] == "0.5"
    again = spectrum_page["again"]  # after a reload the page starts from what was saved
    key = r["shown"] + "\u0000cv"
    assert again["restored"][key]["decision"] == "agree" and again["restored"][key]["vi_quality"] == "3"


def test_desi_targetid_is_shown_exactly(spectrum_page, tmp_path):
    desi = next(i for i in spectrum_page["items"] if i["target"] != "")
    idx = sorted(i["candidate_id"] for i in spectrum_page["items"]).index(desi["candidate_id"])
    page = spectrum_page["tmp"] / "out" / "index.html"
    text = dump_dom(page, tmp_path / "profile", fragment=f"#show={idx}")
    m = re.search(r"<dt>targetid</dt><dd>(\d+)</dd>", text)
    assert m and m.group(1) == str(desi["target"])  # 17 digits, not rounded to a double


def test_exported_decisions_import_back_as_labels(spectrum_page, tmp_path):
    from click.testing import CliRunner

    from spec_vetting.catalog.labels import labels_for
    from spec_vetting.cli import main

    r = spectrum_page["first"]
    export = tmp_path / "review.csv"
    export.write_text(r["csv"], encoding="utf-8", newline="")
    rows = list(csv.DictReader(io.StringIO(r["csv"])))
    assert len(rows) == 2
    res = CliRunner().invoke(main, ["review", "import", str(spectrum_page["root"]), str(export)])
    assert res.exit_code == 0, res.output
    labels, n = labels_for(spectrum_page["root"])
    expected = {(row["candidate_id"], "cv"): row["label"] for row in rows if row["label"]}
    assert labels == expected and n == len(expected) >= 1


# ------------------------------------------------------------------------------- evidence beyond the spectrum


def _gaia(abs_g, bp_rp, plx=20.0, plx_err=0.1):
    return {"gaia_source_id": 4_295_806_720_000_000_001, "gaia_parallax": plx, "gaia_parallax_error": plx_err,
            "gaia_phot_g_mean_mag": abs_g + 3.5, "gaia_bp_rp": bp_rp, "gaia_abs_g": abs_g,
            "gaia_abs_g_error": 0.011, "gaia_sep_arcsec": 0.05, "gaia_n_within": 1}


def test_evidence_numbers_and_the_colour_magnitude_diagram(tmp_path):
    # a dwarf's M_G under a YES for gm: evidence_disagrees; two more matched candidates and one without Gaia
    ids = [("dwarf", "gm", "YES", _gaia(9.0, 2.8)), ("giant", "gm", "YES", _gaia(0.3, 2.4)),
           ("wd1", "wd", "YES", _gaia(11.5, 0.1)), ("none", "wd", "NO", {"gaia_reason": "no ra/dec for the candidate"})]
    v = [verdict_row(c, t, ver, label="YES", p_yes=0.9, **ev) for c, t, ver, ev in ids]
    root = write_catalog(tmp_path / "cat", v, [r for c, t, ver, _ in ids for r in turn_rows(c, t, ver)])
    page = write_page(read_run(root), tmp_path / "out")
    order = ["none", "wd1", "dwarf", "giant"]  # the page lists by task, then id: gm before wd
    order = sorted(order, key=lambda c: ({"dwarf": "gm", "giant": "gm"}.get(c, "wd"), c))
    text = dump_dom(page, tmp_path / "profile", fragment=f"#show={order.index('dwarf')}")
    detail = text[text.index('<div id="detail">'):]
    assert 'data-candidate="dwarf"' in detail[:200]
    assert "evidence beyond the spectrum" in detail and "4295806720000000001" in detail  # source_id exact
    svg = re.search(r'<svg[^>]*class="cmd".*?</svg>', detail, re.S).group(0)
    assert "<title>colour-magnitude diagram</title>" in svg
    assert 'data-locus="main sequence"' in svg and 'data-locus="white dwarfs"' in svg
    assert 'data-others="2"' in svg and svg.count('class="other"') == 2  # giant and wd1; "none" has no place
    assert svg.count('class="this-candidate"') == 1
    assert "in review queue: evidence_disagrees" in detail
