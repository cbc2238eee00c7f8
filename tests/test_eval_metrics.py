"""Metrics against hand-computed tables: UNDECIDED/ERROR as not-YES, F1 n/a without a positive label (left out of
macro-F1), macro over every task that has one."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_eval_support import turn_rows, verdict_row, write_catalog

from spec_vetting.analysis.confidence import calibration, review_queue, review_reasons
from spec_vetting.analysis.evaluate import ABSTAIN_NOTE, evaluate, format_text, task_metrics, write_plots
from spec_vetting.cli import main


def rows(task, pairs):
    return [{"candidate_id": f"{task}-{i}", "task": task, "label": lab, "verdict": ver}
            for i, (lab, ver) in enumerate(pairs)]


MIXED = [("YES", "YES"), ("YES", "NO"), ("YES", "UNDECIDED"), ("YES", "ERROR"),
         ("NO", "NO"), ("NO", "YES"), ("NO", "UNDECIDED"), ("NO", "ERROR")]


def test_mixed_table_by_hand():
    m = task_metrics("cv", rows("cv", MIXED))
    assert (m.tp, m.fp, m.fn, m.tn, m.n) == (1, 1, 3, 1, 8)  # abstentions on YES are FN, on NO never FP
    assert m.accuracy == pytest.approx(2 / 8)  # every abstention is wrong
    assert m.precision == pytest.approx(1 / 2)
    assert m.recall == pytest.approx(1 / 4)
    assert m.f1 == pytest.approx(2 / 6)
    assert m.undecided == pytest.approx(2 / 8) and m.errors == pytest.approx(2 / 8)
    assert m.confusion["YES"] == {"YES": 1, "NO": 1, "UNDECIDED": 1, "ERROR": 1}
    assert m.confusion["NO"] == {"YES": 1, "NO": 1, "UNDECIDED": 1, "ERROR": 1}


def test_no_positive_label_is_f1_na_and_left_out_of_macro():
    ev = evaluate(rows("cv", MIXED) + rows("wd", [("NO", "NO"), ("NO", "NO")]))
    wd = ev.per_task["wd"]
    assert (wd.tp, wd.fp, wd.fn) == (0, 0, 0)
    assert wd.f1 is None and wd.recall is None and wd.precision == 0.0 and wd.accuracy == 1.0
    assert ev.macro_f1 == pytest.approx(2 / 6)  # cv only: was (2/6 + 0)/2
    assert ev.macro_tasks == ["cv"] and ev.no_positive_tasks == ["wd"]
    text = format_text(ev)
    assert "n/a" in text and "macro-F1 (mean over 1 task: cv)" in text
    assert "wd: F1 n/a: no row labelled YES" in text and "left out of macro-F1" in text


def test_a_run_with_no_mistake_has_macro_f1_one():
    """Every verdict right, one of four tasks with a positive label: macro-F1 once read 0.250 (the three tasks
    without one counted as F1 0); it must read 1.000."""
    data = rows("cv", [("YES", "YES"), ("NO", "NO")]) + [
        r for t in ("carbon", "ss", "gm") for r in rows(t, [("NO", "NO"), ("NO", "NO")])]
    ev = evaluate(data)
    assert ev.macro_f1 == pytest.approx(1.0)
    assert ev.no_positive_tasks == ["carbon", "gm", "ss"]
    assert "macro-F1 (mean over 1 task: cv): 1.000" in format_text(ev)


def test_no_positive_label_anywhere_gives_macro_na():
    ev = evaluate(rows("wd", [("NO", "NO"), ("NO", "YES")]))
    assert ev.per_task["wd"].f1 is None and ev.per_task["wd"].precision == 0.0 and ev.macro_f1 is None
    assert "macro-F1: n/a" in format_text(ev)
    assert ev.to_json()["f1_not_applicable"] == ["wd"]


def test_only_undecided_on_positives_is_all_false_negatives():
    m = task_metrics("gm", rows("gm", [("YES", "UNDECIDED"), ("YES", "ERROR"), ("NO", "NO")]))
    assert (m.tp, m.fp, m.fn, m.tn) == (0, 0, 2, 1)
    assert m.f1 == 0.0 and m.accuracy == pytest.approx(1 / 3)


def test_unlabelled_rows_are_left_out_and_counted_and_aliases_merge():
    data = rows("carbon", [("YES", "YES")]) + rows("cc", [("NO", "YES")]) + rows("ss", [(None, "YES")])
    for i, r in enumerate(data):
        r["candidate_id"] = f"c{i}"
    ev = evaluate(data)
    assert list(ev.per_task) == ["carbon"]
    assert ev.per_task["carbon"].n == 2 and ev.per_task["carbon"].fp == 1
    assert ev.unlabelled == 1


def test_text_says_how_abstentions_count_and_shows_table1_for_specvi_tasks_only():
    text = format_text(evaluate(rows("cv", MIXED)))
    assert ABSTAIN_NOTE in text
    assert "Spec-o3-7B" in text and "81.0" in text
    other = format_text(evaluate(rows("ob_star", MIXED)))
    assert "Spec-o3-7B" not in other and ABSTAIN_NOTE in other


def _table1_rows(variant, path, engine="rules", model=None):
    data = rows("cv", MIXED)
    for r in data:
        r.update(variant=variant, path=path, engine=engine, model=model)
    return data


def _table_lines(text):
    start = text.index("published SpecVI-Bench")
    return [line for line in text[start:].splitlines() if line.startswith(("Spec-o3-7B", "this run"))]


def test_table1_is_reference_only_when_the_run_is_not_on_specvi_bench_test_data():
    ev = evaluate(_table1_rows("lamost-lrs-image", "ex/lamost/spec-1.fits"))
    text = format_text(ev)
    assert not ev.table1_comparable
    assert "engine: rules" in text and "data: lamost-lrs-image" in text
    assert "NOT comparable with this run" in text and "lamost-lrs-image" in text.split("NOT comparable")[1]
    assert [line.split()[0] for line in _table_lines(text)] == ["Spec-o3-7B"]  # no row of this run in the table
    assert "81.0" in text
    # the SpecVI-Bench train split is not the published test set either
    train = evaluate(_table1_rows("specvi-inline", "/data/specvi/train_cv.parquet"))
    assert not train.table1_comparable and "NOT comparable" in format_text(train)


def test_table1_has_this_run_beside_it_on_the_specvi_bench_test_split():
    ev = evaluate(_table1_rows("specvi-inline", "/data/specvi/test_cv.parquet", "openai", "spec-o3-7b"))
    text = format_text(ev)
    assert ev.table1_comparable and "NOT comparable" not in text
    assert "engine: openai spec-o3-7b" in text and "data: SpecVI-Bench test_cv.parquet" in text
    ours = _table_lines(text)[-1].split()
    assert ours[:2] == ["this", "run"] and float(ours[2]) == pytest.approx(100 * 2 / 6, abs=0.05)
    # one task shown: the published mean is over that task too, so the columns compare like with like
    assert _table_lines(text)[0].split()[1:] == ["81.0", "81.0"] and "mean over the tasks shown" in text
    out = ev.to_json()
    assert out["table1_comparable"] is True
    assert out["engines"] == {"openai spec-o3-7b": 8} and out["data"] == {"SpecVI-Bench test_cv.parquet": 8}


def test_calibration_by_hand():
    data = [{"p_yes": p, "label": lab, "p_yes_source": "logprobs"}
            for p, lab in [(0.1, "NO"), (0.1, "YES"), (0.9, "YES"), (0.9, "YES"), (1.0, "YES"), (None, "YES")]]
    cal = calibration(data, n_bins=10)
    assert cal.n == 5 and cal.sources == {"logprobs": 5}
    assert cal.bins[1].n == 2 and cal.bins[9].n == 3  # 0.1 in [0.1, 0.2); 0.9 and 1.0 in the last bin
    # bin 1: mean 0.1, fraction 0.5; bin 9: mean 0.9333, fraction 1.0
    assert cal.ece == pytest.approx(2 / 5 * 0.4 + 3 / 5 * (1 - 2.8 / 3))
    assert cal.brier == pytest.approx((0.01 + 0.81 + 0.01 + 0.01 + 0.0) / 5)
    assert calibration([]).ece is None


def test_review_reasons_and_queue_order():
    data = [
        {"candidate_id": "sure", "task": "cv", "verdict": "YES", "p_yes": 0.95, "status": "well_formed"},
        {"candidate_id": "unsure", "task": "cv", "verdict": "YES", "p_yes": 0.7, "status": "well_formed"},
        {"candidate_id": "contra", "task": "cv", "verdict": "NO", "p_yes": 0.9, "status": "well_formed"},
        {"candidate_id": "recov", "task": "cv", "verdict": "NO", "p_yes": None, "status": "recovered"},
        {"candidate_id": "und", "task": "cv", "verdict": "UNDECIDED", "p_yes": None, "status": "none"},
        {"candidate_id": "err", "task": "cv", "verdict": "ERROR", "p_yes": None, "status": None},
    ]
    assert review_reasons(data[0]) == []
    assert review_reasons(data[1]) == ["uncertain_p_yes"]
    assert review_reasons(data[1], threshold=0.6) == []
    queue = review_queue(data)
    assert [r["candidate_id"] for r in queue] == ["err", "und", "recov", "contra", "unsure"]
    assert "review_reasons" not in data[0]  # input rows are not modified
    with pytest.raises(ValueError, match="threshold"):
        review_queue(data, threshold=0.3)


def test_plots_are_pngs(tmp_path):
    data = rows("cv", MIXED)
    for r, p in zip(data, [0.9, 0.2, None, None, 0.1, 0.8, 0.5, None], strict=True):
        r["p_yes"] = p
    written = write_plots(evaluate(data), tmp_path)
    assert sorted(p.name for p in written) == ["calibration.png", "confusion.png"]
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2000


def _catalog(tmp_path):
    v = [verdict_row("a", "cv", "YES", label="YES", p_yes=0.9), verdict_row("b", "cv", "NO", label="YES", p_yes=0.4),
         verdict_row("c", "cv", "UNDECIDED", label="NO"), verdict_row("d", "wd", "NO", label="NO", p_yes=0.2),
         verdict_row("e", "wd", "YES"),  # no label in the catalog
         verdict_row("a", "cv", "NO", label="YES", run_id="run-0", run_date="2025-12-31")]
    t = [r for cid, task in (("a", "cv"), ("b", "cv")) for r in turn_rows(cid, task)]
    return write_catalog(tmp_path / "cat", v, t)


def test_cli_json_latest_run(tmp_path):
    root = _catalog(tmp_path)
    res = CliRunner().invoke(main, ["eval", str(root), "--json", "--plots", str(tmp_path / "plots")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["run_id"] == "run-1"
    cv = out["per_task"]["cv"]
    assert {"n", "accuracy", "precision", "recall", "f1", "undecided", "errors"} <= set(cv)
    assert cv["n"] == 3 and cv["accuracy"] == pytest.approx(1 / 3) and cv["f1"] == pytest.approx(2 / 3)
    assert cv["undecided"] == pytest.approx(1 / 3)
    assert out["per_task"]["wd"]["f1"] is None  # no positive label: n/a
    assert out["macro_f1"] == pytest.approx(2 / 3) and out["f1_not_applicable"] == ["wd"]
    assert out["unlabelled"] == 1
    assert (tmp_path / "plots" / "confusion.png").is_file()


def test_cli_older_run_and_label_file_override(tmp_path):
    root = _catalog(tmp_path)
    res = CliRunner().invoke(main, ["eval", str(root), "--run", "run-0", "--json"])
    assert json.loads(res.output)["per_task"]["cv"]["n"] == 1
    labels = tmp_path / "labels.csv"
    labels.write_text("candidate_id,task,label\ne,wd,yes\nb,,NO\n")  # task left empty: any task
    out = json.loads(CliRunner().invoke(main, ["eval", str(root), "--labels", str(labels), "--json"]).output)
    assert out["unlabelled"] == 0
    assert out["per_task"]["wd"]["f1"] == pytest.approx(1.0)
    assert out["per_task"]["cv"]["accuracy"] == pytest.approx(2 / 3)  # b: NO is now right


def test_cli_review_export_as_labels(tmp_path):
    root = _catalog(tmp_path)
    review = tmp_path / "review.csv"
    review.write_text(
        "candidate_id,task,verdict,decision,label,comment,reviewer\n"
        "e,wd,YES,disagree,NO,looks like a DA,ann\n"
        "a,cv,YES,unsure,,,ann\n"
        "b,cv,NO,agree,,label left empty,ann\n"
    )
    out = json.loads(CliRunner().invoke(main, ["eval", str(root), "--labels", str(review), "--json"]).output)
    assert out["per_task"]["wd"]["n"] == 2 and out["per_task"]["wd"]["accuracy"] == pytest.approx(0.5)
    assert out["per_task"]["cv"]["accuracy"] == pytest.approx(2 / 3)  # b derived NO from agree


def test_cli_errors_are_actionable(tmp_path):
    res = CliRunner().invoke(main, ["eval", str(tmp_path)])
    assert res.exit_code == 2 and "no verdicts/ folder" in res.output
    root = _catalog(tmp_path)
    res = CliRunner().invoke(main, ["eval", str(root), "--run", "nope"])
    assert res.exit_code == 2 and "nope" in res.output
    bad = tmp_path / "bad.csv"
    bad.write_text("candidate_id,label\nx,perhaps\n")
    res = CliRunner().invoke(main, ["eval", str(root), "--labels", str(bad)])
    assert res.exit_code == 2 and "row 1" in res.output and "perhaps" in res.output
    binary = tmp_path / "labels.csv"
    binary.write_bytes(b"\xb3\x00\xff" * 40)
    res = CliRunner().invoke(main, ["eval", str(root), "--labels", str(binary)])
    assert res.exit_code == 2 and "labels.csv" in res.output and "not a UTF-8 CSV" in res.output
    no_id = tmp_path / "noid.csv"
    no_id.write_text("id,label\nx,YES\n")
    res = CliRunner().invoke(main, ["eval", str(root), "--labels", str(no_id)])
    assert res.exit_code == 2 and "no candidate_id column (columns: id, label)" in res.output


def test_cli_review_queue(tmp_path):
    root = _catalog(tmp_path)
    res = CliRunner().invoke(main, ["review-queue", str(root)])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if line and "need review" not in line]
    assert lines[0].startswith("candidate_id,task,verdict")
    assert [line.split(",")[0] for line in lines[1:]] == ["c", "b"]  # UNDECIDED first, then contradicting p_yes
