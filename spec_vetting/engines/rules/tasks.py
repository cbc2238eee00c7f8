"""The tasks the rules engine can judge, one object each: what it measures, where it zooms, how it scores, and the
calibration of its score.

``p_yes = 1 / (1 + exp(-(a * score + b)))`` with ``(a, b)`` per task fitted by ``benchmarks/rules_quality.py
--calibrate`` (maximum likelihood on synthetic spectra at one positive to five hard negatives; seed range in
:data:`CALIBRATION_SEEDS`) and pasted into the task's ``calibration``. ``b`` is held at 0, so p_yes is 0.5 exactly
where the score changes sign and rises with the score (``a > 0``); each score's thresholds (``scoring.py``) were
set so that the free two-parameter fit also puts its boundary within ±0.25 of 0. carbon and ss separate perfectly
on the synthetic set, so their slopes are steep and their thresholds sit in the gap between the classes.
Adding a task is
one entry below, with its ``measure_<task>`` in ``features.py`` and its ``score_<task>`` in ``scoring.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ...protocol import TASK_ALIASES
from .diagnostics import Measurement, RestSpectrum
from .features import ZoomWindow, measure_carbon, measure_cv, measure_gm, measure_ss, measure_wd
from .scoring import TaskScore, score_carbon, score_cv, score_gm, score_ss, score_wd

#: synthetic seeds the calibration (and the choice of weights and thresholds) used; the quality test set uses
#: seeds 100000-101999, see benchmarks/rules_quality.py
CALIBRATION_SEEDS = range(0, 2000)


@dataclass(frozen=True)
class RulesTask:
    """Everything the rules engine knows about one task."""

    task: str  # the task key, as the built-in tasks name it
    class_name: str
    zooms: tuple[ZoomWindow, ...]
    measure: Callable[[RestSpectrum], dict[str, Measurement]]
    score: Callable[[dict[str, Measurement]], TaskScore]
    calibration: tuple[float, float]  # (a, b) of the logistic above

    def p_yes(self, score: float) -> float:
        a, b = self.calibration
        x = a * score + b
        return float(1.0 / (1.0 + math.exp(-x))) if x > -700 else 0.0


_TASKS = (
    RulesTask(
        "cv",
        "Cataclysmic Variable",
        (
            ZoomWindow("Hα and [S II] region", 6450, 6800),
            ZoomWindow("Hγ, He II 4686 and Hβ region", 4250, 5060),
            ZoomWindow("He I 5876 region", 5800, 5960),
            ZoomWindow("higher-order Balmer lines", 3700, 4000),
        ),
        measure_cv,
        score_cv,
        calibration=(1.107, 0.0),
    ),
    RulesTask(
        "carbon",
        "Carbon Star",
        (
            ZoomWindow("C2 Swan band heads 4737 and 5165", 4650, 5250),
            ZoomWindow("C2 Swan band head 5636", 5550, 5720),
            ZoomWindow("CN 4216 band head", 4100, 4300),
            ZoomWindow("TiO 7054 band", 6950, 7200),
        ),
        measure_carbon,
        score_carbon,
        calibration=(5.147, 0.0),
    ),
    RulesTask(
        "ss",
        "S-type Star",
        (
            ZoomWindow("ZrO band 6474 and TiO 6159", 6050, 6600),
            ZoomWindow("ZrO band 5551 and C2 5165", 5100, 5650),
            ZoomWindow("TiO 7054 band", 6950, 7200),
            ZoomWindow("ZrO band 4640", 4550, 4750),
        ),
        measure_ss,
        score_ss,
        calibration=(8.253, 0.0),
    ),
    RulesTask(
        "gm",
        "M-type Giant",
        (
            ZoomWindow("TiO 7054 and CaH 6830/6975 bands and K I 7665/7699", 6750, 7750),
            ZoomWindow("Na I 8183/8195 doublet, TiO 8432 and Ca II triplet", 8100, 8720),
            ZoomWindow("TiO 6159, CaH 6382 and ZrO 6474 bands", 6050, 6560),
            ZoomWindow("C2 5165 and ZrO 5551 bands", 5100, 5650),
        ),
        measure_gm,
        score_gm,
        calibration=(1.461, 0.0),
    ),
    RulesTask(
        "wd",
        "White Dwarf",
        (
            ZoomWindow("Hβ line profile", 4700, 5060),
            ZoomWindow("Hγ, Hδ and He I 4471 line profiles", 4000, 4530),
            ZoomWindow("higher-order Balmer lines and Ca II K", 3700, 4000),
            ZoomWindow("He I 5876 and Hα", 5800, 6700),
        ),
        measure_wd,
        score_wd,
        calibration=(1.370, 0.0),
    ),
)

#: task key -> its rules, in the order above
RULES_TASKS: dict[str, RulesTask] = {t.task: t for t in _TASKS}


def rules_task(task: str) -> RulesTask | None:
    """The rules of a task key (aliases accepted, any case), or None for a task the rules engine cannot judge."""
    key = task.strip().lower()
    return RULES_TASKS.get(TASK_ALIASES.get(key, key))
