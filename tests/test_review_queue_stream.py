"""The review queue of a run of any size: the vectorised reasons equal the rules as the docs state them, the
queue streamed out of the catalog (several scan batches, DuckDB's sort) is in the order a plain Python sort gives,
and the review page of a big selection keeps the most urgent verdicts and says how many it left out."""

from __future__ import annotations

import csv
import io
import math
import random

import pyarrow as pa
import pytest
from click.testing import CliRunner
from test_eval_support import verdict_row, write_catalog

from spec_vetting.analysis import review_queue as rq
from spec_vetting.analysis.confidence import REVIEW_REASONS, reason_lists, review_flags, review_queue, review_table
from spec_vetting.catalog.sorted_stream import sorted_batches
from spec_vetting.cli import main

P_VALUES = [None, float("nan"), float("inf"), -0.1, 1.2, 0.0, 1.0, 0.5, 0.2, 0.8]


def _random_rows(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    return [{
        "candidate_id": f"c{i:05d}", "task": rng.choice(["cv", "wd", "carbon"]),
        "verdict": rng.choice(["YES", "NO", "UNDECIDED", "ERROR", None]),
        "status": rng.choice(["well_formed", "recovered", "none", None]),
        "recovered_verdict": rng.choice([None, None, "YES", "NO", "", "MAYBE"]),
        "p_yes": rng.choice(P_VALUES + [rng.random() for _ in range(6)]),
    } for i in range(n)]


def _rules(row: dict, threshold: float) -> list[str]:
    """The queue's rules as the module docs and README state them, written out plainly (the oracle)."""
    out = []
    v, p = row["verdict"], row["p_yes"]
    if v == "ERROR":
        out.append("error")
    if v == "UNDECIDED":
        out.append("undecided")
    if row["status"] == "recovered":
        out.append("recovered_format")
    if row["recovered_verdict"] in ("YES", "NO"):
        out.append("verdict_outside_answer")
    usable = p is not None and math.isfinite(p) and 0 <= p <= 1
    if usable and v in ("YES", "NO"):
        if (v == "YES" and p < 0.5) or (v == "NO" and p > 0.5):
            out.append("contradicting_p_yes")
        if max(p, 1 - p) < threshold:
            out.append("uncertain_p_yes")
    return out


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_reasons_equal_the_rules(seed):
    rows = _random_rows(seed, 500)
    threshold = [0.5, 0.8, 0.95, 1.0, 0.6, 0.8][seed]
    got = reason_lists(review_flags(review_table(rows), threshold=threshold))
    assert got == [_rules(r, threshold) for r in rows]


def test_missing_columns_count_as_null():
    table = pa.table({"verdict": ["ERROR", "YES"]})
    assert reason_lists(review_flags(table)) == [["error"], []]


def test_sort_spills_and_keeps_python_order():
    rng = random.Random(3)
    n = 60_000
    table = pa.table({"u": pa.array([rng.randrange(7) for _ in range(n)], pa.int8()),
                      "c": [rng.random() for _ in range(n)],
                      "t": [rng.choice(["cv", "wd", "Wd", "é"]) for _ in range(n)],
                      "id": [f"x{rng.randrange(10**9)}-{i}" for i in range(n)]})
    got = pa.Table.from_batches(list(sorted_batches(table.schema, table.to_batches(max_chunksize=5000),
                                                    ["u", "c", "t", "id"], memory_limit="32MB", batch_rows=4096)))
    want = sorted(table.to_pylist(), key=lambda r: (r["u"], r["c"], r["t"], r["id"]))
    assert got.to_pylist() == want
    top = pa.Table.from_batches(list(sorted_batches(table.schema, table.to_batches(max_chunksize=5000),
                                                    ["u", "c", "t", "id"], limit=10)))
    assert top.to_pylist() == want[:10]
    with pytest.raises(ValueError, match="no such column"):
        list(sorted_batches(table.schema, [], ["nope"]))


def _big_catalog(tmp_path, n=300, seed=5):
    rng = random.Random(seed)
    rows = []
    for i, r in enumerate(_random_rows(seed, n)):
        rows.append(verdict_row(r["candidate_id"], r["task"], r["verdict"], p_yes=r["p_yes"], status=r["status"],
                                recovered_verdict=r["recovered_verdict"],
                                error_message="line one\nline two" if i % 17 == 0 else None))
    # a second run whose rows must not leak into the latest run's queue
    rows += [verdict_row(f"old{i}", "cv", "ERROR", run_id="run-0", run_date="2025-12-31") for i in range(5)]
    rng.shuffle(rows)
    return write_catalog(tmp_path / "cat", rows), [r for r in rows if r["run_id"] == "run-1"]


def test_cli_queue_streams_in_python_order(tmp_path, monkeypatch):
    root, rows = _big_catalog(tmp_path)
    monkeypatch.setattr(rq, "SCAN_ROWS", 7)  # many scan batches
    res = CliRunner().invoke(main, ["review-queue", str(root), "--threshold", "0.9"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    summary = [line for line in lines if "need review" in line]
    got = list(csv.DictReader(io.StringIO("\n".join(line for line in lines if "need review" not in line))))

    def key(r):
        reasons = _rules(r, 0.9)
        p = r["p_yes"]
        usable = p is not None and math.isfinite(p) and 0 <= p <= 1
        return (min(REVIEW_REASONS.index(x) for x in reasons), max(p, 1 - p) if usable else 0.0, r["task"],
                r["candidate_id"])

    want = sorted((r for r in rows if _rules(r, 0.9)), key=key)
    assert [(g["candidate_id"], g["task"]) for g in got] == [(w["candidate_id"], w["task"]) for w in want]
    assert [g["review_reasons"] for g in got] == [";".join(_rules(w, 0.9)) for w in want]
    assert all("\n" not in g["error_message"] for g in got)
    assert summary == [f"{len(want)} of {len(rows)} verdicts of run run-1 need review"]


def test_cli_queue_of_an_unknown_run_says_what_to_do(tmp_path):
    root, _ = _big_catalog(tmp_path, n=20)
    res = CliRunner().invoke(main, ["review-queue", str(root), "--run", "nope"])
    assert res.exit_code == 2 and "run 'nope' has no verdict rows" in res.output
    assert "spec-vet catalog runs" in res.output


def test_report_keeps_the_most_urgent_and_says_how_many_it_left_out(tmp_path, monkeypatch):
    from spec_vetting.report.page import selection_from_catalog

    root, rows = _big_catalog(tmp_path, n=120)
    monkeypatch.setattr(rq, "SCAN_ROWS", 11)
    sel = selection_from_catalog(root, max_candidates=15)
    assert sel.total == len(rows) and len(sel.index) == 15 and sel.left_out == len(rows) - 15
    assert sel.queued == sum(1 for r in rows if _rules(r, 0.8))
    errors = sum(1 for r in rows if r["verdict"] == "ERROR")
    assert errors >= 15  # the 15 most urgent are all ERROR rows
    assert all(r["verdict"] == "ERROR" for r in sel.index)
    assert [(r["task"], r["candidate_id"]) for r in sel.index] == sorted((r["task"], r["candidate_id"])
                                                                         for r in sel.index)
    res = CliRunner().invoke(main, ["report", str(root), "-o", str(tmp_path / "page"), "--max-candidates", "15",
                                    "--per-file", "4", "--task", "cv"])
    assert res.exit_code == 0, res.output
    cv = [r for r in rows if r["task"] == "cv"]
    assert f"{len(cv) - 15} more verdicts were selected" in res.output
    assert "and 3 part files beside it" in res.output  # 15 candidates, 4 per file
    page = (tmp_path / "page" / "part-004.html").read_text(encoding="utf-8")
    assert "more verdicts of this selection are not on this page" in page
    alias = CliRunner().invoke(main, ["report", str(root), "-o", str(tmp_path / "c"), "--task", "cs"])
    assert alias.exit_code == 0 and "carbon" in (tmp_path / "c" / "index.html").read_text(encoding="utf-8")
    res = CliRunner().invoke(main, ["report", str(root), "-o", str(tmp_path / "none"), "--task", "gm"])
    assert res.exit_code == 2 and "has no verdicts of task gm; its tasks: carbon, cv, wd" in res.output


def test_report_files_each_hold_their_own_slice_of_the_run(tmp_path, monkeypatch):
    from spec_vetting.report import page

    root, rows = _big_catalog(tmp_path, n=40)
    files = page.build_pages(page.selection_from_catalog(root), per_file=6)
    got = [[(c["task"], c["candidate_id"]) for c in _candidates(html)] for _, html in files]
    want = sorted((r["task"], r["candidate_id"]) for r in rows)
    assert got == [want[i:i + 6] for i in range(0, len(want), 6)]
    by_key = {(r["task"], r["candidate_id"]): r for r in rows}
    for _, html in files:
        for c in _candidates(html):
            assert c["verdict"] == by_key[(c["task"], c["candidate_id"])]["verdict"]
            assert c["turns"] == []  # this catalog has no turn rows


def _candidates(html: str) -> list[dict]:
    import json
    import re

    m = re.search(r'<script type="application/json" id="review-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))["candidates"]


def _evidence_rule(row: dict) -> bool:
    """evidence_disagrees as the README states it, with the loci's lines written out (the oracle): at
    parallax/error > 10, gm YES with M_G > 5; wd YES more than 3 mag brighter than M_G = 11.3 + 3.4 (BP-RP), or wd
    NO within 1 mag of it; cv YES more than 2 mag brighter than M_G = 2.07 + 3.17 (BP-RP)."""
    mg, plx, err, c = (row.get(k) for k in ("gaia_abs_g", "gaia_parallax", "gaia_parallax_error", "gaia_bp_rp"))
    if mg is None or plx is None or not err or plx / err <= 10:
        return False
    task, v = row["task"], row["verdict"]
    if task == "gm":
        return v == "YES" and mg > 5
    if c is None:
        return False
    if task == "wd":
        wd = 11.3 + 3.4 * c
        return (v == "YES" and wd - mg > 3) or (v == "NO" and abs(mg - wd) < 1)
    return task == "cv" and v == "YES" and (2.07 + 3.17 * c) - mg > 2


def test_evidence_disagrees_follows_the_stated_rule_and_ranks_after_errors():
    rng = random.Random(11)
    rows = []
    for i in range(2000):
        rows.append({
            "candidate_id": f"e{i:05d}", "task": rng.choice(["gm", "wd", "cv", "carbon"]),
            "verdict": rng.choice(["YES", "NO", "UNDECIDED"]), "status": "well_formed", "recovered_verdict": None,
            "p_yes": rng.choice([0.05, 0.95]),
            "gaia_abs_g": rng.choice([None, rng.uniform(-2, 16)]),
            "gaia_parallax": rng.uniform(0.5, 20), "gaia_parallax_error": rng.choice([0.5, 1.0, 2.0]),
            "gaia_bp_rp": rng.choice([None, rng.uniform(-0.4, 3.0)]),
        })
    flags = review_flags(review_table(rows))
    got = flags["evidence_disagrees"].to_pylist()
    assert got == [_evidence_rule(r) for r in rows]
    assert 20 < sum(got) < 1000  # the fixture exercises both sides
    assert REVIEW_REASONS.index("evidence_disagrees") == 1
    # an M giant called YES whose parallax says dwarf: queued even at p_yes 0.99, after ERROR rows only
    queued = review_queue([
        {"candidate_id": "dwarf", "task": "gm", "verdict": "YES", "p_yes": 0.99, "gaia_abs_g": 9.0,
         "gaia_parallax": 20.0, "gaia_parallax_error": 0.1, "gaia_bp_rp": 2.8},
        {"candidate_id": "unsure", "task": "gm", "verdict": "YES", "p_yes": 0.6},
        {"candidate_id": "broken", "task": "gm", "verdict": "ERROR"},
    ])
    assert [r["candidate_id"] for r in queued] == ["broken", "dwarf", "unsure"]
    assert queued[1]["review_reasons"] == ["evidence_disagrees"]
