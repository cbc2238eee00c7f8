"""The review page as built (no browser): escaping of untrusted text, CSP, queue filter, CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import re

from click.testing import CliRunner

from spec_vetting.cli import main
from spec_vetting.report.page import build_page, json_for_script
from spec_vetting.catalog.read import read_run
from test_eval_support import XSS_IMG, XSS_SCRIPT, png, turn_rows, verdict_row, write_catalog


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
    assert "http://" not in page and "https://" not in page  # nothing fetched from anywhere


def test_records_carry_ids_trajectory_and_deduplicated_images(tmp_path):
    page = build_page(read_run(_catalog(tmp_path)))
    data = _data_block(page)
    assert data["run_id"] == "run-1"
    assert [c["candidate_id"] for c in data["candidates"]] == ["evil", "ok-1", "und"]
    ok = next(c for c in data["candidates"] if c["candidate_id"] == "ok-1")
    assert ok["ids"]["obsid"] == 1000 and ok["ids"]["ra"] == 10.0
    assert ok["turns"][0]["zoom"] == [6500.0, 6600.0] and ok["turns"][0]["image"]
    assert ok["initial_image"] and ok["turns"][1]["image"] is None
    refs = {c["turns"][0]["image"] for c in data["candidates"][:2]}
    assert len(refs) == 1  # the same PNG is embedded once
    assert page.count(f'id="img-{refs.pop()}"') == 1
    assert data["schema"]["columns"] == ["candidate_id", "task", "verdict", "decision", "label", "comment", "reviewer"]


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
    assert res.exit_code == 1 and "missing" in res.output


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
