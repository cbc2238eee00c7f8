"""One label parser: every reader (candidate list, SpecVI-Bench rows, label file) accepts the same spellings."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spec_vetting.catalog.labels import read_label_file
from spec_vetting.errors import CandidateListError
from spec_vetting.io.candidates import load_candidates
from spec_vetting.io.specvi import read_specvi_rows
from spec_vetting.label_values import LabelValueError, parse_label

YES = ["YES", "yes", " Yes ", "y", "Y", "true", "TRUE", "t", "T", "1", True, np.True_, 1, np.int64(1), 1.0, b"yes"]
NO = ["NO", "no", "n", "N", "false", "False", "f", "F", "0", False, np.False_, 0, 0.0, np.float32(0.0)]
EMPTY = [None, "", "  ", "none", "NaN", "null", math.nan, np.float64("nan")]
BAD = ["maybe", "perhaps", "YES NO", "2", 2, 0.5, "oui"]


@pytest.mark.parametrize("value", YES)
def test_yes_spellings(value):
    assert parse_label(value) == "YES"


@pytest.mark.parametrize("value", NO)
def test_no_spellings(value):
    assert parse_label(value) == "NO"


@pytest.mark.parametrize("value", EMPTY)
def test_empty_values_are_no_label(value):
    assert parse_label(value) is None


@pytest.mark.parametrize("value", BAD)
def test_other_values_are_refused_with_the_value(value):
    with pytest.raises(LabelValueError, match="is not YES or NO") as exc:
        parse_label(value)
    assert exc.value.value == value and isinstance(exc.value, ValueError)


def test_the_three_readers_agree(tmp_path):
    """'T' used to be an error in a candidate list and in SpecVI rows but YES in a label file."""
    values = ["T", "f", "yes", "0", ""]
    want = ["YES", "NO", "YES", "NO", None]

    lst = tmp_path / "cands.csv"
    lst.write_text("candidate_id,path,label\n" + "".join(f"c{i},a.fits,{v}\n" for i, v in enumerate(values)))
    assert [c.label for c in load_candidates(lst)] == want

    labels = tmp_path / "labels.csv"
    labels.write_text("candidate_id,label\n" + "".join(f"c{i},{v}\n" for i, v in enumerate(values)))
    assert read_label_file(labels) == {(f"c{i}", None): w for i, w in enumerate(want) if w is not None}

    table = pa.table({
        "data_source": ["cv"] * len(values),
        "prompt": [[{"role": "user", "content": "<image>\nIs it a CV?"}]] * len(values),
        "reward_model": [{"ground_truth": v} for v in values],
        "extra_info": [json.dumps({"index": i}) for i in range(len(values))],
    })  # fmt: skip
    pq.write_table(table, tmp_path / "specvi.parquet")
    assert [r.label for r in read_specvi_rows(tmp_path / "specvi.parquet")] == want


def test_readers_name_file_and_row_of_a_bad_label(tmp_path):
    lst = tmp_path / "cands.csv"
    lst.write_text("path,label\na.fits,YES\nb.fits,perhaps\n")
    with pytest.raises(CandidateListError, match=r"row 2: label 'perhaps' is not YES or NO\. use YES or NO"):
        load_candidates(lst)
    labels = tmp_path / "labels.csv"
    labels.write_text("candidate_id,label\na,YES\nb,perhaps\n")
    with pytest.raises(CandidateListError, match=r"labels.csv, row 2: label 'perhaps' is not YES or NO"):
        read_label_file(labels)
