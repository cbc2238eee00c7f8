"""Capacity planning: the token model and the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from spec_vetting.analysis.capacity import (
    MARKUP_TOKENS_PER_TURN,
    SYSTEM_TOKENS,
    TASK_PROMPT_TOKENS,
    TOOL_RESPONSE_TEXT_TOKENS,
    Throughput,
    Workload,
    plan_capacity,
)
from spec_vetting.cli import main


def test_token_model_by_hand():
    w = Workload(turns=3, gen_tokens_per_turn=100, full_view_tokens=480, zoom_tokens=300)
    per = w.per_inspection()
    first = SYSTEM_TOKENS + TASK_PROMPT_TOKENS + 480 + 2 * MARKUP_TOKENS_PER_TURN
    step = 100 + TOOL_RESPONSE_TEXT_TOKENS + 300 + 2 * MARKUP_TOKENS_PER_TURN
    assert per["prefill_tokens"] == pytest.approx(first + 2 * step)
    # billed prompt tokens re-read the history: first, first+step, first+2 steps
    assert per["prompt_tokens"] == pytest.approx(3 * first + 3 * step)
    assert per["decode_tokens"] == 300


def test_plan_scales_with_candidates_and_gpus():
    w = Workload(turns=4, gen_tokens_per_turn=250, full_view_tokens=476, zoom_tokens=308)
    one = plan_capacity(1000, 1, w, Throughput(10000, 2000))
    eight = plan_capacity(8000, 8, w, Throughput(10000, 2000))
    gpu_s = one.per_inspection["prefill_tokens"] / 10000 + 1000 / 2000
    assert one.per_inspection["gpu_seconds"] == pytest.approx(gpu_s)
    assert one.totals["gpu_hours"] == pytest.approx(1000 * gpu_s / 3600)
    assert eight.totals["wall_hours"] == pytest.approx(one.totals["wall_hours"])
    with pytest.raises(ValueError):
        plan_capacity(10, 0)


def test_default_picture_tokens_come_from_the_renderer():
    w = Workload()
    # a 792x472 full view is about 476 tokens (protocol section 4)
    assert 400 <= w.full_view_tokens <= 520
    assert 0 < w.zoom_tokens < w.full_view_tokens


def test_plan_cli_prints_hours_and_json():
    res = CliRunner().invoke(main, ["plan", "--candidates", "200000", "--gpus", "8"])
    assert res.exit_code == 0, res.output
    assert "GPU-hours" in res.output and "hours" in res.output
    res = CliRunner().invoke(main, ["plan", "-n", "100", "-g", "2", "--json", "--turns", "5"])
    data = json.loads(res.output)
    assert data["workload"]["turns"] == 5
    assert data["totals"]["wall_hours"] == pytest.approx(data["totals"]["gpu_hours"] / 2)
    res = CliRunner().invoke(main, ["plan", "-n", "100", "-g", "0"])
    assert res.exit_code == 2
