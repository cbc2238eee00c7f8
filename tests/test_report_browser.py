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

from spec_vetting.report.page import write_page
from spec_vetting.catalog.read import read_run
from test_eval_support import XSS_IMG, XSS_SCRIPT, turn_rows, verdict_row, write_catalog

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install chromium; `make setup` and CI install it)"
)


def dump_dom(page_path, profile_dir, fragment="#selftest") -> str:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000", "--dump-dom",
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
    rows = list(csv.DictReader(io.StringIO(dom["result"]["csv"])))
    assert list(rows[0]) == ["candidate_id", "task", "verdict", "decision", "label", "comment", "reviewer"]
    first, second = rows  # the selftest marks the first two listed candidates (sorted by task, id)
    assert (first["candidate_id"], first["decision"], first["label"]) == ("cv-001", "agree", "YES")
    assert first["comment"] == 'selftest, "quoted", comma' and first["reviewer"] == "selftest"
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
    assert [row.split(",")[0] for row in r["csv"].split("\r\n")[1:3]] == ["a1", "a2"]  # export covers both too


def test_split_page_opens_at_the_candidate_asked_for(split_pages):
    tmp, paths = split_pages
    text = dump_dom(paths[1], tmp / "profile-b", fragment="#show=3")  # where a click on b2 in index.html lands
    detail = re.search(r'<div id="detail"><div class="candidate" data-candidate="([^"]+)"', text)
    assert detail and detail.group(1) == "b2"
