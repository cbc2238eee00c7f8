"""Fidelity checks to the upstream training code that need no model: Table-1 scoring with the reward, the built-in
prompt warning."""

from __future__ import annotations

import asyncio

import numpy as np

from spec_vetting.analysis.evaluate import evaluate, reward_verdict
from spec_vetting.analysis.reward import predicted_class
from spec_vetting.answers import trajectory_text
from spec_vetting.engines.scripted import ScriptedEngine
from spec_vetting.inspect.loop import run_inspection
from spec_vetting.inspect.tasks import get_task
from spec_vetting.pipeline.preflight import builtin_prompt_warning
from spec_vetting.spectrum import Spectrum, SpectrumMeta
from spec_vetting.types import InspectionContext

ZOOM = ('<think>z</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
        '{"wavelength_range": [6500, 6600]}}\n</tool_call>')


def _run(script):
    wl = np.linspace(3700.0, 9100.0, 400)
    spec = Spectrum(wl, np.ones_like(wl), np.ones_like(wl), np.zeros(wl.shape, bool), "",
                    SpectrumMeta(survey="lamost", variant="x"))
    ctx = InspectionContext(candidate_id="c", task="cv", spectrum=spec)
    return asyncio.run(run_inspection(ctx, get_task("cv"), ScriptedEngine(script),
                                      renderer=lambda *a, **k: b"PNG"))


def test_table1_prediction_is_the_rewards_on_the_trajectory():
    for script in ([ZOOM, "<think>a</think><answer>\\boxed{YES}</answer>"], ["so NO I think"],
                   [ZOOM + "<answer>\\boxed{NO}</answer>", "<think>b</think>\\boxed{YES}"], ["<think>x</think>"]):
        r = _run(script)
        row = {"verdict": r.verdict, "recovered_verdict": r.recovered_verdict}
        upstream = predicted_class(trajectory_text(r.turns)[0])
        assert (reward_verdict(row) == "YES") == (upstream == "YES")
        assert (reward_verdict(row) == "NO") == (upstream == "NO")


def test_eval_table1_counts_recovered_verdicts():
    rows = [{"task": "cv", "label": "YES", "verdict": "UNDECIDED", "recovered_verdict": "YES"},
            {"task": "cv", "label": "NO", "verdict": "NO"}]
    ev = evaluate(rows)
    assert ev.per_task["cv"].tp == 0 and ev.reward_per_task["cv"].tp == 1


def test_builtin_prompt_warning():
    assert builtin_prompt_warning("openai", {"inline": 4}) is None
    w = builtin_prompt_warning("openai", {"builtin": 3, "inline": 1})
    assert w.startswith("WARNING") and "3 of 4" in w and "BUILT-IN" in w
