"""The review page draws a candidate's light curve (issue 38): per band, time on x, magnitude inverted (bright at
the top), from the points kept beside the evidence cache; checked in headless Chromium (``--dump-dom``) on
points written here by hand, so the expected positions follow from the numbers alone.
"""

from __future__ import annotations

import json
import re

import pytest
from test_eval_support import turn_rows, verdict_row, write_catalog
from test_report_browser import CHROMIUM, dump_dom

from spec_vetting.catalog.run_data import read_run
from spec_vetting.evidence.lightcurve_points import read_points, write_points
from spec_vetting.report.page import write_page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")

#: g: 4 epochs, the second 3 mag brighter (an outburst); r: 3 epochs
POINTS = {"g": [[58300.0, 58400.0, 58500.0, 58600.0], [18.0, 15.0, 18.1, 17.9], [0.05, 0.02, 0.05, 0.05]],
          "r": [[58310.0, 58410.0, 58510.0], [17.5, 17.6, 17.4], [0.04, 0.04, 0.04]]}


def test_points_round_trip_and_the_page_draws_the_light_curve(tmp_path):
    extra = json.dumps({"ztf_kind": "light_curve", "ztf_g_max_brightening_mag": 3.0})
    rows = [verdict_row("dn", "cv", "YES", label="YES", p_yes=0.9, evidence_extra=extra),
            verdict_row("plain", "cv", "NO", label="NO", p_yes=0.1)]
    root = write_catalog(tmp_path / "cat", rows, [r for c in ("dn", "plain") for r in turn_rows(c, "cv", "YES")])
    write_points(root / "_evidence" / "ztf-0123", "run1", {"dn": ("ztf", POINTS)})
    assert read_points(root, ["dn", "plain"]) == {"dn": {"ztf": POINTS}}
    page = write_page(read_run(root), tmp_path / "out")
    text = dump_dom(page, tmp_path / "profile", fragment="#show=0")  # dn sorts first
    detail = text[text.index('<div id="detail">'):]
    assert 'data-candidate="dn"' in detail[:200]
    svg = re.search(r'<svg[^>]*class="light-curve".*?</svg>', detail, re.S).group(0)
    assert 'data-source="ztf"' in svg and 'data-bands="g,r"' in svg
    g = re.search(r'<g class="band" data-band="g" data-points="4">(.*?)</g>', svg, re.S).group(1)
    cx = [float(x) for x in re.findall(r'<circle cx="([-0-9.]+)"', g)]
    cy = [float(y) for y in re.findall(r'<circle cx="[-0-9.]+" cy="([-0-9.]+)"', g)]
    assert cx == sorted(cx) and cx[0] < cx[-1]  # time runs left to right
    assert cy[1] == min(cy)  # the outburst, brightest, is drawn highest (magnitude inverted)
    assert cy[2] == max(cy)  # 18.1, the faintest, lowest
    assert 'data-band="r" data-points="3"' in svg
    # a candidate without light curves draws none
    other = dump_dom(page, tmp_path / "profile2", fragment="#show=1")
    assert 'class="light-curve"' not in other[other.index('<div id="detail">'):]
