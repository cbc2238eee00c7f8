"""Catalog rows: the row builders fill every column, and rows_to_table refuses a row that does not match the schema."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import spec_vetting
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


def _imports(path: Path, package: str) -> set[str]:
    """Absolute names of the spec_vetting modules a file imports (relative imports resolved)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.add(name)
            out.update(f"{name}.{a.name}" for a in node.names)
    return {n for n in out if n.startswith("spec_vetting")}


def _package_imports(sub: str) -> set[str]:
    root = Path(spec_vetting.__file__).parent
    target = root / sub
    files = [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))
    names = set()
    for f in files:
        package = ".".join(f.relative_to(root.parent).parts[:-1])  # what a level-1 relative import starts from
        names |= _imports(f, package)
    return names


@pytest.mark.parametrize(
    ("sub", "forbidden"),
    [
        ("catalog", ("spec_vetting.pipeline", "spec_vetting.report", "spec_vetting.evaluate", "spec_vetting.export",
                     "spec_vetting.cli", "spec_vetting.engines")),
        ("io", ("spec_vetting.catalog",)),
        ("evaluate.py", ("spec_vetting.report",)),
        ("labels.py", ("spec_vetting.",)),
    ],
)
def test_catalog_layering(sub, forbidden):
    bad = sorted(n for n in _package_imports(sub) if n.startswith(forbidden))
    assert not bad, f"{sub} imports {bad}"
