"""The ``rules`` engine: a classical inspector with a line list, driven through the same loop as the model.

It needs no GPU and no weights. For one inspection it measures the task's diagnostics once (rest frame, ivar and
mask honoured; see ``diagnostics.py``, ``features.py`` and ``tasks.py``), decides (``decision.py``), and then
plays the trained conversation: one ``<tool_call>`` per turn zooming on each window it measured (so every trace
carries the images), and a final turn whose ``<think>`` cites the measured numbers, followed by
``<answer>\\boxed{YES} <justification></answer>`` (or NO). ``p_yes`` comes from the calibrated score.

When the data cannot support a decision, the final text holds no verdict (and neither the word YES nor NO, so the
protocol's fallbacks recover nothing) and :attr:`EngineReply.abstain_reason` carries the reason; the loop records
UNDECIDED.

It reads ``ctx.spectrum``'s arrays, ivar and mask, ``ctx.redshift`` and ``ctx.evidence`` (Gaia M_G and colour:
``astrometry.py``), never the survey's class or subclass. Its
identity has ``model=None``: its output is never presented as the model's.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass

from ...engine_interface import Engine, EngineSession
from ...protocol import TOOL_NAME
from ...types import EngineIdentity, EngineReply, InspectionContext, Message, Sampling, Usage
from .decision import Decision, decide
from .diagnostics import Measurement, RestSpectrum
from .features import ZoomWindow
from .tasks import CALIBRATION_SEEDS, RULES_TASKS, rules_task

#: bump when diagnostics, scores, calibration or the texts change what the engine answers
RULES_VERSION = "1.4"

#: at most this many zooms before answering (the trained budget is 8 assistant turns; keep room to answer)
MAX_ZOOMS = 4

_VERDICT_WORD = re.compile(r"\b(no|yes)\b", re.IGNORECASE)


def _without_verdict_words(text: str) -> str:
    """Abstain texts must not contain YES/NO: the protocol's fallbacks would read a verdict out of them."""
    return _VERDICT_WORD.sub(lambda m: "zero" if m.group(0).lower() == "no" else "affirmative", text)


@dataclass
class Plan:
    """What the engine will say in one inspection: zooms first, then the final turn."""

    decision: Decision
    zooms: list[ZoomWindow]
    notes: list[str]  # per zoom: the measurements read in that window, cited in the next turn
    leftover: list[str]  # measurements combining several zooms (e.g. the Balmer decrement), cited in the final turn
    covered: bool = True  # whether any of the task's own windows overlaps the data
    full_view: str = ""  # measurements over the whole spectrum (continuum slope, S/N), cited in the first turn


def _inside(window: tuple[float, float], zoom: ZoomWindow) -> bool:
    return zoom.lo <= window[0] and window[1] <= zoom.hi


def _zoom_for(m: Measurement, zooms: list[ZoomWindow]) -> int | str:
    """Where a measurement is shown: the index of the zoom holding all its windows (line and pseudo-continuum);
    ``"final"`` when its windows lie in several zooms (a ratio of two lines); ``"full"`` when they do not fit
    any zoom (continuum slope, S/N over a wide range: read from the full view)."""
    for i, z in enumerate(zooms):
        if m.windows and all(_inside(w, z) for w in m.windows):
            return i
    if m.windows and all(any(_inside(w, z) for z in zooms) for w in m.windows):
        return "final"
    return "full"


def make_plan(rs: RestSpectrum, task: str, *, redshift_known: bool = True, evidence: dict | None = None) -> Plan:
    """Measure and decide once; lay out the zooms (those overlapping the rest-frame coverage) and what to cite."""
    decision = decide(rs, task, redshift_known=redshift_known, evidence=evidence)
    fs = rules_task(task)
    lo, hi = rs.coverage
    zooms = [z for z in (fs.zooms if fs else ()) if z.hi > lo and z.lo < hi][:MAX_ZOOMS]
    covered = bool(zooms)
    line = decision.measurements.get("unexplained_emission")
    if line is not None:
        # the line that stops the decision (redshift unknown) is looked at first
        (w_lo, w_hi), = line.windows
        zooms = [ZoomWindow("unexplained emission line", math.floor(w_lo - 100), math.ceil(w_hi + 100)),
                 *zooms[:MAX_ZOOMS - 1]]
    if not zooms and hi - lo > 2:
        # none of the task's windows is in the data (e.g. a high-redshift object): still look, at what there is
        zooms = [ZoomWindow("available rest-frame range", math.ceil(lo), math.floor(hi))]
    notes: list[list[str]] = [[] for _ in zooms]
    leftover: list[str] = []
    full_view: list[str] = []
    # every measurement is reported in the turn after the zoom that shows all its windows; one spanning several
    # zooms in the final turn, one over the whole spectrum in the first; numbers that could not be measured
    # outside any zoom are reported only when the decision depends on them
    for key, m in decision.measurements.items():
        where = _zoom_for(m, zooms)
        if isinstance(where, int):
            notes[where].append(m.fmt())
        elif m.ok or key in decision.cited:
            (leftover if where == "final" else full_view).append(m.fmt())
    return Plan(decision, zooms, ["; ".join(n) for n in notes], leftover, covered, "; ".join(full_view))


def tool_call_text(zoom: ZoomWindow) -> str:
    """The trained tool-call block (protocol section 2.4): label first, integer window."""
    call = {"name": TOOL_NAME, "arguments": {"label": f"Zoom on the {zoom.label}",
                                             "wavelength_range": [int(round(zoom.lo)), int(round(zoom.hi))]}}
    return "<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>"


def _a(name: str) -> str:
    """``a``/``an`` before a class name as spoken: an M-type Giant, an S-type Star, a White Dwarf."""
    return f"an {name}" if name[:1] in "AEIOU" or name[:2] in ("M-", "S-") else f"a {name}"


def _frame_sentence(d: Decision) -> str:
    if not d.redshift_known:
        return "The redshift is unknown, so I take the spectrum as it is (z = 0)."
    return f"I work in the rest frame (z = {d.redshift:.5f})."


def turn_text(plan: Plan, turn: int) -> tuple[str, bool]:
    """The assistant text for ``turn`` and whether it is the final one."""
    d = plan.decision
    if turn < len(plan.zooms):
        zoom = plan.zooms[turn]
        if turn == 0:
            seen = f"In the full view: {plan.full_view}. " if plan.full_view else ""
            think = (f"To decide whether this is {_a(d.class_name)}, I measure the diagnostics an expert checks, with "
                     f"pseudo-continuum windows and the pixels' inverse variance. {_frame_sentence(d)} {seen}"
                     f"First the {zoom.label}.")
        else:
            prev = plan.notes[turn - 1] or "nothing measurable"
            think = f"In the {plan.zooms[turn - 1].label}: {prev}. Next the {zoom.label}."
        return f"<think>\n{think}\n</think>\n{tool_call_text(zoom)}", False
    return final_text(plan), True


def final_text(plan: Plan) -> str:
    d = plan.decision
    lines = []
    if plan.zooms and (plan.covered or plan.notes[-1]):
        lines.append(f"In the {plan.zooms[-1].label}: {plan.notes[-1] or 'nothing measurable'}.")
    if not plan.covered:
        lines.append(f"{_frame_sentence(d)} None of my diagnostic windows for {_a(d.class_name)} falls inside the "
                     "data.")
    if not plan.zooms and plan.full_view:  # no zoom turn came before: the whole-spectrum numbers go here
        lines.append(f"In the full view: {plan.full_view}.")
    if plan.leftover:
        lines.append("Also measured: " + "; ".join(plan.leftover) + ".")
    if d.verdict is None:
        lines.append(f"The data cannot support a decision: {d.reason}.")
        think = "\n".join(lines)
        return _without_verdict_words(f"<think>\n{think}\n</think>\nVerdict withheld (UNDECIDED): {d.reason}.")
    lines.append(f"Rules score {d.score:+.2f}, calibrated probability of {_a(d.class_name)} {d.p_yes:.2f}.")
    think = "\n".join(lines)
    return f"<think>\n{think}\n</think>\n<answer>\\boxed{{{d.verdict}}} {d.justification[:1].upper()}" \
           f"{d.justification[1:]}.</answer>"


class _RulesSession(EngineSession):
    def __init__(self, ctx: InspectionContext):
        self.ctx = ctx
        self.plan: Plan | None = None

    def _make_plan(self) -> Plan:
        spectrum = self.ctx.spectrum
        if spectrum is None:
            raise ValueError(f"candidate {self.ctx.candidate_id}: the rules engine needs ctx.spectrum")
        rs = RestSpectrum.from_spectrum(spectrum, self.ctx.redshift)
        return make_plan(rs, self.ctx.task, redshift_known=self.ctx.redshift is not None,
                         evidence=self.ctx.evidence)

    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        t0 = time.perf_counter()
        if self.plan is None:
            self.plan = self._make_plan()
        text, final = turn_text(self.plan, turn)
        d = self.plan.decision
        reply = EngineReply(text=text, usage=Usage(), latency_s=time.perf_counter() - t0, endpoint=None,
                            finish_reason="stop")
        if final:
            reply.p_yes = d.p_yes
            if d.verdict is None:
                reply.abstain_reason = d.reason
        return reply


class RulesEngine(Engine):
    """Classical diagnostics through the Spec-o3 loop; ``engine="rules"``, ``model=None`` in every output row."""

    name = "rules"
    drives_model = False  # reads measurements, not the prompt text
    p_yes_source = "rules_score"

    def identity(self) -> EngineIdentity:
        return EngineIdentity(
            engine=self.name,
            engine_version=RULES_VERSION,
            model=None,
            model_info={
                "kind": "classical diagnostics (no model)",
                "calibration": {k: list(t.calibration) for k, t in RULES_TASKS.items()},
                "calibration_seeds": [CALIBRATION_SEEDS.start, CALIBRATION_SEEDS.stop],
            },
        )

    def session(self, ctx: InspectionContext) -> EngineSession:
        return _RulesSession(ctx)
