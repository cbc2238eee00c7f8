"""The review page as built (no browser): escaping of untrusted text, CSP, queue filter, CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest
from click.testing import CliRunner
from report_support import spectrum_catalog
from test_eval_support import XSS_IMG, XSS_SCRIPT, png, turn_rows, verdict_row, write_catalog

from spec_vetting.catalog.run_data import read_run
from spec_vetting.cli import main
from spec_vetting.report.page import build_page, json_for_script


def _catalog(tmp_path):
    v = [verdict_row("ok-1", "cv", "YES", label="YES", p_yes=0.97),
         verdict_row("evil", "cv", "NO", label="YES", p_yes=0.6, justification=XSS_SCRIPT),
         verdict_row("und", "wd", "UNDECIDED", label="NO")]
    shared = png(50, 30)
    t = (turn_rows("ok-1", "cv", image=shared) + turn_rows("evil", "cv", first_text=XSS_IMG + XSS_SCRIPT, image=shared)
         + turn_rows("und", "wd"))
    return write_catalog(tmp_path / "cat", v, t)


def _data_block(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="review-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_json_for_script_has_no_markup_characters():
    text = json_for_script({"t": "</script><!-- & <b>"})
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"t": "</script><!-- & <b>"}


def test_untrusted_text_cannot_leave_the_data_block(tmp_path):
    page = build_page(read_run(_catalog(tmp_path)))
    assert "document.body.setAttribute" not in page.split('id="review-data">')[0]
    # the only </script> closers are the page's own: data, images, code
    assert "</script><script>document" not in page
    assert "<img src=x" not in page
    data = _data_block(page)
    evil = next(c for c in data["candidates"] if c["candidate_id"] == "evil")
    assert evil["turns"][0]["assistant_text"] == XSS_IMG + XSS_SCRIPT  # kept verbatim, as data
    assert evil["justification"] == XSS_SCRIPT


def test_code_is_inlined_and_pinned_by_csp_hashes(tmp_path):
    page = build_page(read_run(_catalog(tmp_path)))
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "img-src data:" in csp and "unsafe-inline" not in csp
    js = re.search(r"<script>(.*)</script>\s*</body>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write"):
        assert sink not in js  # untrusted text only goes in through textContent
    assert "textContent" in js
    # nothing fetched from anywhere (the SVG namespace of the colour-magnitude diagram is a name, never fetched)
    page = page.replace("'http://www.w3.org/2000/svg'", "")
    assert "http://" not in page and "https://" not in page


def test_records_carry_ids_trajectory_and_deduplicated_images(tmp_path):
    page = build_page(read_run(_catalog(tmp_path)))
    data = _data_block(page)
    assert data["run_id"] == "run-1"
    assert [c["candidate_id"] for c in data["candidates"]] == ["evil", "ok-1", "und"]
    ok = next(c for c in data["candidates"] if c["candidate_id"] == "ok-1")
    assert ok["ids"]["obsid"] == "1000" and ok["ids"]["ra"] == "10"  # ids are text: no rounding by JavaScript
    assert ok["turns"][0]["zoom"] == [6500.0, 6600.0] and ok["turns"][0]["image"]
    assert ok["initial_image"] and ok["turns"][1]["image"] is None
    refs = {c["turns"][0]["image"] for c in data["candidates"][:2]}
    assert len(refs) == 1  # the same PNG is embedded once
    assert page.count(f'id="img-{refs.pop()}"') == 1
    assert data["schema"]["columns"][:7] == ["candidate_id", "task", "verdict", "decision", "label", "comment",
                                             "reviewer"]  # the label-list columns first, as older exports
    assert data["schema"]["columns"][7:] == ["vi_quality", "vi_issues", "vi_z", "vi_spectype", "run_id",
                                             "reviewed_at"]


def test_only_review_queue(tmp_path):
    data = _data_block(build_page(read_run(_catalog(tmp_path)), only_queue=True))
    assert [c["candidate_id"] for c in data["candidates"]] == ["evil", "und"]
    assert data["candidates"][0]["review_reasons"] == ["contradicting_p_yes", "uncertain_p_yes"]


def test_cli_report_writes_page_for_the_run(tmp_path):
    root = _catalog(tmp_path)
    res = CliRunner().invoke(main, ["report", str(root), "-o", str(tmp_path / "out"), "--only", "review-queue"])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "out" / "index.html").read_text()
    assert "review queue" in page and len(_data_block(page)["candidates"]) == 2
    res = CliRunner().invoke(main, ["report", str(root), "-o", str(tmp_path / "o2"), "--run", "missing"])
    assert res.exit_code == 2 and "missing" in res.output


def test_run_data_finds_the_run_in_the_rows_without_run_records(tmp_path):
    import shutil

    root = _catalog(tmp_path)
    with_records = read_run(root)
    shutil.rmtree(root / "_runs")  # no manifest, no LATEST pointer: the newest run in the rows
    bare = read_run(root)
    assert bare.run_id == with_records.run_id == "run-1"
    assert sorted(r["candidate_id"] for r in bare.verdicts) == sorted(r["candidate_id"] for r in with_records.verdicts)
    assert bare.initial_image("ok-1", "cv") == with_records.initial_image("ok-1", "cv") is not None
    assert [t["turn"] for t in bare.assistant_turns("evil", "cv")] == [0, 1]


def test_run_data_without_run_records_takes_the_run_of_the_newest_date(tmp_path):
    import shutil

    v = [verdict_row("a", "cv", "YES", run_id="z-old", run_date="2026-01-01"),
         verdict_row("b", "cv", "NO", run_id="a-new", run_date="2026-02-01")]
    root = write_catalog(tmp_path / "cat", v)
    shutil.rmtree(root / "_runs")
    data = read_run(root, with_turns=False)
    assert data.run_id == "a-new" and [r["candidate_id"] for r in data.verdicts] == ["b"]


def test_big_runs_are_split_over_files_that_each_list_every_candidate(tmp_path):
    from spec_vetting.report.page import build_pages, write_pages

    data = read_run(_catalog(tmp_path))
    pages = build_pages(data, per_file=2)
    assert [name for name, _ in pages] == ["index.html", "part-002.html"]
    blocks = [_data_block(text) for _, text in pages]
    for n, block in enumerate(blocks):
        assert [c["candidate_id"] for c in block["index"]] == ["evil", "ok-1", "und"]  # the whole run, every file
        assert [c["part"] for c in block["index"]] == [0, 0, 1] and block["part"] == n
        assert block["parts"] == [{"file": "index.html", "n": 2}, {"file": "part-002.html", "n": 1}]
    assert [c["candidate_id"] for c in blocks[0]["candidates"]] == ["evil", "ok-1"]
    assert [c["candidate_id"] for c in blocks[1]["candidates"]] == ["und"]
    # each file embeds the images of its own candidates only
    und = blocks[1]["candidates"][0]
    und_refs = {und["initial_image"], und["turns"][0]["image"]}
    first_refs = {c["turns"][0]["image"] for c in blocks[0]["candidates"]}
    assert all(f'id="img-{r}"' in pages[1][1] for r in und_refs)
    assert not any(f'id="img-{r}"' in pages[1][1] for r in first_refs - und_refs)
    assert "file 2 of 2" in pages[1][1]
    # a smaller page written later into the same folder leaves no stale part file behind
    out = tmp_path / "site"
    assert [p.name for p in write_pages(data, out, per_file=1)] == ["index.html", "part-002.html", "part-003.html"]
    assert [p.name for p in write_pages(data, out)] == ["index.html"]
    assert sorted(p.name for p in out.iterdir()) == ["index.html"]


def test_cli_report_per_file(tmp_path):
    root = _catalog(tmp_path)
    res = CliRunner().invoke(main, ["report", str(root), "-o", str(tmp_path / "out"), "--per-file", "2"])
    assert res.exit_code == 0, res.output
    assert "and 1 part files beside it" in res.output and (tmp_path / "out" / "part-002.html").is_file()
    res = CliRunner().invoke(main, ["report", str(root), "-o", str(tmp_path / "out"), "--per-file", "0"])
    assert res.exit_code == 2


# ------------------------------------------------------------------------------------ spectrum, ids, size, import


@pytest.fixture(scope="module")
def spectra(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spectra")
    root, items = spectrum_catalog(tmp)
    return root, items


def _unpack(p, n):
    import numpy as np

    q = np.frombuffer(base64.b64decode(p["q"]), dtype="<u2")[:n].astype(float)
    return np.where(q == 65535, np.nan, p["lo"] + q / 65534 * (p["hi"] - p["lo"]))


def test_page_carries_the_spectrum_read_again_from_the_file(spectra):
    import numpy as np

    from spec_vetting.io import read_spectrum
    from spec_vetting.report.page import MAX_POINTS, downsample

    root, _ = spectra
    data = _data_block(build_page(read_run(root)))
    assert all(c["spectrum"] for c in data["candidates"]), [c["spectrum_error"] for c in data["candidates"]]
    desi = next(c for c in data["candidates"] if c["ids"].get("survey") == "desi")
    spec = desi["spectrum"]
    assert spec["n_pixels"] > MAX_POINTS and spec["binned"] == 2 and spec["n"] <= MAX_POINTS
    truth = read_spectrum(desi["ids"]["path"], int(desi["ids"]["targetid"]))
    wb, fb, nb, masked, _ = downsample(truth.wavelength, truth.flux, truth.ivar, truth.mask)
    for name, ref in (("wave", wb), ("flux", fb), ("noise", nb)):
        got = _unpack(spec[name], spec["n"])
        ok = np.isfinite(ref)
        span = spec[name]["hi"] - spec[name]["lo"]
        assert np.all(np.abs(got[ok] - ref[ok]) <= span / 65534 * 0.51 + 1e-9), name  # 16-bit packing only
    assert sum(b - a + 1 for a, b in spec["mask"]) == int(masked.sum())
    lamost = next(c for c in data["candidates"] if c["spectrum"]["n_pixels"] <= MAX_POINTS)
    assert lamost["spectrum"]["binned"] == 1  # LAMOST/SDSS keep every pixel


def test_downsample_weights_by_ivar_and_marks_bins_with_no_good_pixel():
    import numpy as np

    from spec_vetting.report.page import downsample

    w = np.arange(10.0)
    f = np.array([1, 3, 5, 5, 0, 0, 2, 2, 9, 9], float)
    iv = np.array([1, 3, 1, 1, 1, 1, 4, 4, 1, 1], float)
    mask = np.array([0, 0, 0, 0, 1, 1, 0, 0, 0, 0], bool)
    wb, fb, nb, masked, k = downsample(w, f, iv, mask, max_points=5)
    assert k == 2 and list(wb) == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert fb[0] == pytest.approx(2.5) and nb[0] == pytest.approx(0.5)  # (1*1 + 3*3) / 4, 1/sqrt(4)
    assert list(masked) == [False, False, True, False, False] and fb[2] == 0  # masked bin keeps its flux
    assert np.isnan(nb[2])


def test_ids_are_text_numbers_are_formatted_and_tool_calls_readable(spectra):
    root, items = spectra
    data = _data_block(build_page(read_run(root)))
    desi = next(c for c in data["candidates"] if c["ids"].get("survey") == "desi")
    targetid = next(str(i["target"]) for i in items if i["target"] != "")
    assert desi["ids"]["targetid"] == targetid and int(targetid) > 2**53  # exact, as text
    assert desi["ids"]["ra"] == "126.5024" and desi["ids"]["dec"] == "-0.000145"
    assert desi["ids"]["redshift"] == "-0.000145" and desi["z"] == -0.0001450149058217  # the plot keeps the number
    assert "H\u03b1" in desi["turns"][0]["tool_call"] and "\\u03b1" not in desi["turns"][0]["tool_call"]


def test_images_only_where_the_spectrum_cannot_be_read(spectra, tmp_path):
    from spec_vetting.report.page import candidate_records

    root, _ = spectra
    data = read_run(root)
    records, store = candidate_records(data)
    assert not store.blobs and all(r["initial_image"] is None for r in records)
    assert all(t["has_image"] for r in records for t in r["turns"][:1])  # said so on the page
    records, store = candidate_records(data, images="all")
    assert store.blobs and all(r["initial_image"] for r in records)
    data.verdicts[0]["path"] = str(tmp_path / "gone.fits")
    records, store = candidate_records(data)
    gone = next(r for r in records if r["candidate_id"] == data.verdicts[0]["candidate_id"])
    assert gone["spectrum"] is None and "gone.fits" in gone["spectrum_error"] and gone["initial_image"]
    with pytest.raises(ValueError):
        candidate_records(data, images="some")


def test_page_size_per_candidate(spectra):
    root, _ = spectra
    data = read_run(root)
    per_candidate = len(build_page(data).encode()) / len(data.verdicts)  # code and styles included
    assert per_candidate < 100_000, per_candidate  # README: under 100 kB with the spectrum, no PNG


def test_line_table_is_vacuum_and_covers_the_groups():
    from spec_vetting.lines import GROUPS, LINES, air_to_vacuum, lines_in

    assert air_to_vacuum(6562.80) == pytest.approx(6564.61, abs=0.02)  # H-alpha air -> vacuum
    names = {line.name for line in LINES}
    for wanted in ("H\u03b1", "He II 4686", "Ca II K", "Na I D2", "TiO 7054", "CaH 6382", "C2 5165", "ZrO 6474",
                   "Mg II", "C IV"):
        assert wanted in names
    assert {line.group for line in LINES} == set(GROUPS)
    assert [line.wavelength for line in lines_in("balmer")] == sorted(line.wavelength for line in lines_in("balmer"))


def test_review_queue_csv_carries_reason_and_error_message(tmp_path):
    import csv
    import io

    v = [verdict_row("e1", "cv", "ERROR", error_kind="read_error", error_message="file gone:\n/data/x.fits"),
         verdict_row("u1", "cv", "UNDECIDED", reason="budget"), verdict_row("ok", "cv", "YES", p_yes=0.99)]
    root = write_catalog(tmp_path / "cat", v)
    res = CliRunner().invoke(main, ["review-queue", str(root)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["candidate_id"] for r in rows] == ["e1", "u1"]
    assert rows[0]["error_kind"] == "read_error" and rows[0]["error_message"] == "file gone: /data/x.fits"
    assert rows[1]["reason"] == "budget" and rows[1]["review_reasons"] == "undecided"


def _export(rows):
    from spec_vetting.catalog.review_schema import REVIEW_CSV_COLUMNS

    lines = [",".join(REVIEW_CSV_COLUMNS)]
    for r in rows:
        lines.append(",".join(str(r.get(c, "")) for c in REVIEW_CSV_COLUMNS))
    return "\r\n".join(lines) + "\r\n"


def test_review_import_brings_decisions_back_as_labels_for_eval_and_export(tmp_path):
    from spec_vetting.catalog.labels import attach_labels, labels_for, reviewed_labels_path

    root = _catalog(tmp_path)  # ok-1 YES (label YES), evil NO (label YES), und UNDECIDED (label NO)
    f = tmp_path / "review.csv"
    f.write_text(_export([
        {"candidate_id": "ok-1", "task": "cv", "verdict": "YES", "decision": "disagree", "vi_quality": "3",
         "vi_issues": "RS", "vi_z": "0.0012", "reviewer": "ann", "run_id": "run-1"},
        {"candidate_id": "und", "task": "wd", "verdict": "UNDECIDED", "decision": "unsure", "comment": "Low S/N"},
    ]), encoding="utf-8")
    res = CliRunner().invoke(main, ["review", "import", str(root), str(f)])
    assert res.exit_code == 0, res.output
    assert "imported 2 decisions on run run-1 (1 labels: 0 YES, 1 NO)" in res.output
    stored = reviewed_labels_path(root).read_text(encoding="utf-8")
    assert "ok-1,cv,YES,disagree,NO" in stored and ",ann,3,RS,0.0012," in stored
    labels, n = labels_for(root)
    assert n == 1 and labels == {("ok-1", "cv"): "NO"}
    rows = attach_labels(read_run(root, with_turns=False).verdicts, labels)
    assert {r["candidate_id"]: r["label"] for r in rows} == {"ok-1": "NO", "evil": "YES", "und": "NO"}
    res = CliRunner().invoke(main, ["eval", str(root), "--json"])
    assert res.exit_code == 0 and "1 reviewer labels from `spec-vet review import` are used" in res.output
    # importing again replaces the decision on the same verdict and keeps the others
    f.write_text(_export([{"candidate_id": "ok-1", "task": "cv", "verdict": "YES", "decision": "agree"}]))
    assert CliRunner().invoke(main, ["review", "import", str(root), str(f)]).exit_code == 0
    assert labels_for(root)[0] == {("ok-1", "cv"): "YES"}
    assert "und,wd,UNDECIDED,unsure" in reviewed_labels_path(root).read_text(encoding="utf-8")


def test_review_import_refuses_rows_the_run_does_not_have(tmp_path):
    from spec_vetting.catalog.labels import reviewed_labels_path

    root = _catalog(tmp_path)
    f = tmp_path / "review.csv"
    for rows, says in (
        ([{"candidate_id": "nope", "task": "cv", "decision": "agree"}], "run run-1 has no such verdict"),
        ([{"candidate_id": "ok-1", "task": "cv", "verdict": "NO", "decision": "agree"}],
         "the decision was made on verdict NO, the run's is YES"),
        ([{"candidate_id": "ok-1", "task": "cv", "decision": "maybe", "vi_quality": "7"}], "decision 'maybe'"),
        ([{"candidate_id": "ok-1", "task": "cv", "decision": "agree", "label": "NO"}], "contradicts"),
    ):
        f.write_text(_export(rows), encoding="utf-8")
        res = CliRunner().invoke(main, ["review", "import", str(root), str(f)])
        assert res.exit_code == 2 and says in res.output and "nothing imported" in res.output, res.output
    assert not reviewed_labels_path(root).exists()


def test_evidence_reaches_the_page_and_the_list_filters_on_it(tmp_path):
    from spec_vetting.report.page import selection_from_catalog

    gaia = {"gaia_abs_g": 9.0, "gaia_abs_g_error": 0.01, "gaia_bp_rp": 2.8, "gaia_parallax": 20.0,
            "gaia_parallax_error": 0.1, "gaia_source_id": 12345678901234567}
    v = [verdict_row("dwarf", "gm", "YES", p_yes=0.9, **gaia), verdict_row("plain", "gm", "YES", p_yes=0.9)]
    root = write_catalog(tmp_path / "cat", v, [r for c in ("dwarf", "plain") for r in turn_rows(c, "gm", "YES")])
    page = build_page(read_run(root))
    data = json.loads(re.search(r'<script type="application/json" id="review-data">(.*?)</script>', page,
                                re.S).group(1))
    index = {r["candidate_id"]: r for r in data["index"]}
    assert index["dwarf"]["cmd"] == [2.8, 9.0] and "cmd" not in index["plain"]
    assert index["dwarf"]["review_reasons"] == ["evidence_disagrees"] and index["plain"]["review_reasons"] == []
    dwarf = next(c for c in data["candidates"] if c["candidate_id"] == "dwarf")
    assert dwarf["evidence"]["gaia_source_id"] == "12345678901234567" and dwarf["evidence"]["gaia_abs_g"] == 9.0
    assert data["cmd_loci"]["white dwarfs"][:2] == [11.3, 3.4] and data["cmd_loci"]["main sequence"][:2] == [2.07, 3.17]
    assert 'value="evidence">evidence disagrees<' in page and "colour-magnitude diagram" in page
    # the streamed selection (bigger runs) carries the places too
    sel = selection_from_catalog(root)
    assert {r["candidate_id"]: r.get("cmd") for r in sel.index} == {"dwarf": [2.8, 9.0], "plain": None}
