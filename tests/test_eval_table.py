"""The Arrow path of `spec-vet eval` (attach_labels_table, evaluate_table) gives the dict path's result, digit for
digit: the same JSON and text, on rows with every awkward value (label spellings, file labels with and without a
task, task aliases, unknown verdicts, recovered verdicts, unusable p_yes, SpecVI rows)."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from spec_vetting.analysis.evaluate import EVAL_COLUMNS, evaluate, evaluate_table, format_text
from spec_vetting.catalog.labels import attach_labels, attach_labels_table

SPECVI = "specvi-inline"


def _rows(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        specvi = rng.random() < 0.4
        out.append({
            "run_id": "r", "candidate_id": f"c{rng.randrange(n // 2 + 1)}",
            "task": rng.choice(["cv", "wd", "cs", "carbon", "ss", "s", "ob_star"]),
            "verdict": rng.choice(["YES", "NO", "UNDECIDED", "ERROR", "MAYBE", None]),
            "recovered_verdict": rng.choice([None, "YES", "NO", ""]),
            "label": rng.choice(["YES", "no", "1", "0", "", None, "True", "n"]),
            "p_yes": rng.choice([None, float("nan"), -0.1, 1.5, 1.0, 0.0, rng.random(), rng.random(), rng.random()]),
            "p_yes_source": rng.choice([None, "", "logprobs", "self_consistency"]),
            "engine": rng.choice([None, "", "openai", "scripted"]), "model": rng.choice([None, "", "m7b"]),
            "path": rng.choice([None, "/d/test_cv.parquet", "/d/train_cv.parquet", f"/x/{i}.fits"]),
            "survey": rng.choice([None, "lamost", ""]),
            "variant": SPECVI if specvi else rng.choice([None, "", "lamost-lrs-image"]),
            "status": "ok",
        })
    return out


def _both(rows, labels):
    names = ["run_id", "candidate_id", "task", *EVAL_COLUMNS]
    table = pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.float64() if c == "p_yes" else pa.string())
                                                         for c in names]))
    by_dicts = evaluate(attach_labels([dict(r) for r in rows], labels), run_id="r")
    by_table = evaluate_table(attach_labels_table(table, labels), run_id="r")
    return by_dicts, by_table


@pytest.mark.parametrize("seed", range(12))
def test_table_path_equals_dict_path(seed):
    rows = _rows(seed, 400)
    rng = random.Random(seed)
    labels = None
    if seed % 3:
        labels = {(f"c{rng.randrange(200)}", rng.choice([None, "cv", "carbon", "ss"])): rng.choice(["YES", "NO"])
                  for _ in range(60)}
    a, b = _both(rows, labels)
    assert json.dumps(a.to_json()) == json.dumps(b.to_json())
    assert format_text(a) == format_text(b)


def test_table_path_specvi_test_rows_are_comparable_and_empty_label_runs():
    rows = [dict(r, variant=SPECVI, path="/d/test_cv.parquet", task="cv", label="YES") for r in _rows(1, 50)]
    a, b = _both(rows, None)
    assert a.table1_comparable and b.table1_comparable
    assert json.dumps(a.to_json()) == json.dumps(b.to_json())
    a, b = _both([dict(r, label=None) for r in rows], None)
    assert b.unlabelled == 50 and not b.per_task
    assert json.dumps(a.to_json()) == json.dumps(b.to_json()) and format_text(a) == format_text(b)
