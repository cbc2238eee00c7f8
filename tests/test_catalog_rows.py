"""Catalog rows: the row builders fill every column, and rows_to_table refuses a row that does not match the schema."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spec_vetting.catalog.rows import empty_row, error_result, rows_to_table, turn_rows, verdict_row
from spec_vetting.catalog.schema import TURNS_SCHEMA, VERDICTS_SCHEMA
from spec_vetting.types import InspectionResult, ToolCall, Turn, Usage


@dataclass
class _Candidate:
    candidate_id: str = "c-1"
    path: str = "/data/c-1.fits"
    target: int | None = None
    label: str | None = "YES"
    ra: float | None = 10.0
    dec: float | None = 20.0


def _result() -> InspectionResult:
    zoom = Turn(index=0, assistant_text="<tool_call>...</tool_call>",
                tool_call=ToolCall(name="spectral_visualization_tool", arguments={"wavelength_range": [6500, 6600]}),
                tool_response_text="zoomed", image_png=b"\x89PNG zoom", zoom_window=(6500.0, 6600.0),
                usage=Usage(prompt_tokens=100, completion_tokens=10, cached_tokens=0), latency_s=0.2)
    answer = Turn(index=1, assistant_text="<answer>\\boxed{YES}</answer>", usage=Usage(120, 8, 100))
    return InspectionResult(candidate_id="c-1", task="cv", verdict="YES", status="well_formed", engine="scripted",
                            initial_image_png=b"\x89PNG full", turns=[zoom, answer], started_at=1.7e9, elapsed_s=1.0)


def test_row_builders_fill_exactly_the_schema():
    v = verdict_row(_result(), _Candidate(), None, run_id="r1", shard_id="s0", redshift=0.1)
    assert set(v) == set(VERDICTS_SCHEMA.names)
    turns = turn_rows(_result(), run_id="r1", shard_id="s0")
    assert [t["turn"] for t in turns] == [-1, 0, 1] and all(set(t) == set(TURNS_SCHEMA.names) for t in turns)
    assert rows_to_table([v], "verdicts").num_rows == 1 and rows_to_table(turns, "turns").num_rows == 3
    err = verdict_row(error_result("c-1", "cv", "read_error", "bad file"), _Candidate(), None,
                      run_id="r1", shard_id="s0", redshift=None)
    assert rows_to_table([err], "verdicts").column("verdict").to_pylist() == ["ERROR"]


def test_unknown_column_is_an_error_naming_it():
    row = {**verdict_row(_result(), _Candidate(), None, run_id="r1", shard_id="s0", redshift=None), "new_col": 1}
    with pytest.raises(ValueError, match=r"verdicts row 0 \(candidate 'c-1'\): unknown column\(s\) 'new_col'"):
        rows_to_table([row], "verdicts")


def test_missing_column_is_an_error_naming_it():
    rows = turn_rows(_result(), run_id="r1", shard_id="s0")
    del rows[2]["endpoint"]
    with pytest.raises(ValueError, match=r"turns row 2 \(candidate 'c-1'\): missing column\(s\) 'endpoint'"):
        rows_to_table(rows, "turns")


def test_empty_row_and_unknown_table():
    assert rows_to_table([{**empty_row("turns"), "run_id": "r", "candidate_id": "c", "turn": 0}], "turns").num_rows == 1
    assert rows_to_table([], "verdicts").schema == VERDICTS_SCHEMA
    with pytest.raises(ValueError, match="no catalog table 'verdict'"):
        rows_to_table([], "verdict")
