"""One bad value in a model reply must not lose its shard: the value is made safe (or the pair becomes an ERROR row
naming it), and every other pair of the shard is written. Reproduces what a hostile server did: a lone surrogate in
the assistant text (UnicodeEncodeError at the Parquet write) and ``usage.prompt_tokens = 1e30`` (OverflowError)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from test_pipeline_run import ANSWER_YES, FakeCandidate, fast_render  # noqa: F401  (fixture)

from spec_vetting.catalog.read import read_turns, read_verdicts
from spec_vetting.catalog.rows import MAX_TEXT_CHARS, empty_row, make_row_safe, rows_to_table
from spec_vetting.engines.scripted import ScriptedEngine
from spec_vetting.pipeline import job_from_dict, runner
from spec_vetting.types import EngineReply, Usage


def test_unsafe_values_are_made_safe_and_listed():
    row = {**empty_row("verdicts"), "run_id": "r", "candidate_id": "c", "verdict": "YES",
           "justification": "broad H\ud83d alpha", "prompt_tokens": 1e30, "completion_tokens": 12.0,
           "obsid": np.int64(123456789), "n_turns": 2 ** 40, "reason": "x" * (MAX_TEXT_CHARS + 5)}
    with pytest.raises((UnicodeEncodeError, OverflowError, pa.ArrowInvalid, pa.ArrowTypeError)):
        rows_to_table([row], "verdicts")  # what failed the whole shard before
    safe = make_row_safe(row, "verdicts")
    table = rows_to_table([safe], "verdicts")  # writable now
    assert table.num_rows == 1
    assert safe["justification"] == "broad H\ufffd alpha"
    assert safe["prompt_tokens"] is None and safe["completion_tokens"] == 12 and safe["obsid"] == 123456789
    assert safe["n_turns"] is None and len(safe["reason"]) == MAX_TEXT_CHARS
    notes = safe["value_notes"]
    for what in ("justification: invalid UTF-16 surrogates",
                 "prompt_tokens: 1000000000000000019884624838656 is outside", "n_turns:", "reason: cut from"):
        assert what in notes


def _reply(messages, ctx, turn):
    if ctx.candidate_id == "c-1":  # a lone surrogate, as a broken JSON escape gives
        return EngineReply(text="<answer>\\boxed{YES} broad H\ud83d emission</answer>")
    if ctx.candidate_id == "c-2":  # an absurd usage count
        return EngineReply(text=ANSWER_YES, usage=Usage(prompt_tokens=1e30, completion_tokens=5))
    if ctx.candidate_id == "c-3":  # a value no column can hold: the pair becomes an ERROR row naming it
        return EngineReply(text=ANSWER_YES, latency_s="soon")
    return ANSWER_YES


class PoisonEngine(ScriptedEngine):
    """The scripted engine answering with :func:`_reply`.

    A job file names it as ``test_poison_replies:PoisonEngine``."""

    def __init__(self):
        super().__init__(_reply)


def test_a_poisoned_reply_costs_only_its_own_pair(tmp_path, monkeypatch):
    cands = [FakeCandidate(f"c-{i}", path=f"/data/c-{i}.fits") for i in range(6)]
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: cands)
    job = job_from_dict({
        "candidates": ["unused.csv"], "tasks": ["cv"], "out": str(tmp_path / "cat"),
        "engine": {"name": "test_poison_replies:PoisonEngine"},
        "shard_size": 6, "cluster": {"processes": False, "workers": 1, "dashboard": False},
    })
    out = runner.run_job(job, progress=False, echo=lambda s: None)
    assert out.status == "finished"
    rows = {r["candidate_id"]: r for r in read_verdicts(tmp_path / "cat").to_pylist()}
    assert sorted(rows) == [f"c-{i}" for i in range(6)]  # nothing lost
    assert rows["c-1"]["verdict"] == "YES" and "surrogates" in rows["c-1"]["value_notes"]
    assert rows["c-2"]["verdict"] == "YES" and rows["c-2"]["prompt_tokens"] is None
    assert "prompt_tokens" in rows["c-2"]["value_notes"]
    bad = rows["c-3"]
    assert bad["verdict"] == "ERROR" and bad["error_kind"] == "bad_reply"
    assert "c-3" in bad["error_message"] and "cv" in bad["error_message"]
    assert all(rows[f"c-{i}"]["verdict"] == "YES" for i in (0, 4, 5))
    turns = read_turns(tmp_path / "cat").to_pylist()
    assert {t["candidate_id"] for t in turns} >= {"c-0", "c-1", "c-2", "c-4", "c-5"}


def test_a_value_only_arrow_refuses_costs_only_its_pair(tmp_path, monkeypatch):
    # the shard's table is built once; when Arrow refuses it (here: 1e30 tokens with the row clean-up switched
    # off), each pair is converted alone and only the one at fault becomes an ERROR row
    from spec_vetting.pipeline import shard

    monkeypatch.setattr(shard, "make_row_safe", lambda row, table: row)
    cands = [FakeCandidate(f"c-{i}", path=f"/data/c-{i}.fits") for i in (0, 2, 4)]
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: cands)
    job = job_from_dict({
        "candidates": ["unused.csv"], "tasks": ["cv"], "out": str(tmp_path / "cat"),
        "engine": {"name": "test_poison_replies:PoisonEngine"},
        "shard_size": 3, "cluster": {"processes": False, "workers": 1, "dashboard": False},
    })
    assert runner.run_job(job, progress=False, echo=lambda s: None).status == "finished"
    rows = {r["candidate_id"]: r for r in read_verdicts(tmp_path / "cat").to_pylist()}
    assert sorted(rows) == ["c-0", "c-2", "c-4"]
    assert rows["c-2"]["verdict"] == "ERROR" and rows["c-2"]["error_kind"] == "bad_reply"
    assert "c-2" in rows["c-2"]["error_message"]
    assert rows["c-0"]["verdict"] == rows["c-4"]["verdict"] == "YES"
