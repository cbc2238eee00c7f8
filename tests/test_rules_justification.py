"""The rules engine's justifications quote only what that inspection measured: every claim ``name = value ± error
(above|below threshold at Nσ: meaning)`` is parsed back and checked against the measurement of the same name in
the same Decision (value, error, side of the threshold, its significance), and against the score's evidence (it
pulls the verdict's way)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from spec_vetting.engines.rules.decision import decide
from spec_vetting.engines.rules.diagnostics import RestSpectrum
from spec_vetting.engines.rules.engine import final_text, make_plan
from spec_vetting.engines.rules.tasks import RULES_TASKS
from spec_vetting.synthetic.synthetic import KINDS, make_spectrum

TASKS = tuple(RULES_TASKS)
CLAIM = re.compile(r"(?:^|; )(?P<name>[^;=]+?) = (?P<value>-?\d+\.\d+)(?: ± (?P<error>\d+\.\d+))?(?P<unit> Å)? "
                   r"\((?P<rel>above|below) (?P<thr>-?\d+\.\d+)(?: Å)?(?: at (?P<sigma>\d+\.\d)σ)?\): "
                   r"(?P<meaning>[^;]*)")
MISSING = re.compile(r"(?:^|; )(?P<name>[^;=]+?) not measurable \(")
SIGMA = 3.0


def check_justification(d) -> list[str]:
    """Problems with one Decision's justification (empty when every claim follows the numbers)."""
    problems = []
    text = d.justification
    claims = list(CLAIM.finditer(text))
    missing = list(MISSING.finditer(text))
    if not claims and not missing:
        return [f"no measured claim in {text!r}"]
    by_name = {m.name: m for m in d.measurements.values()}
    sign = 1 if d.verdict == "YES" else -1
    for c in claims:
        name, thr = c["name"], float(c["thr"])
        meas = by_name.get(name)
        if meas is None or meas.value is None:
            problems.append(f"claim on {name!r}, which this inspection did not measure")
            continue
        digits = len(c["value"].split(".")[1])
        if f"{meas.value:.{digits}f}" != c["value"]:
            problems.append(f"{name}: claimed {c['value']}, measured {meas.value}")
        if (c["rel"] == "above") != (meas.value >= thr):
            problems.append(f"{name}: claimed {c['rel']} {thr}, measured {meas.value}")
        if meas.error is not None:
            if c["error"] is None or f"{meas.error:.{digits}f}" != c["error"]:
                problems.append(f"{name}: cited without its error {meas.error} ({c['error']})")
            elif abs(meas.value - thr) < SIGMA * meas.error:
                problems.append(f"{name}: cited as {c['rel']} {thr} but within {SIGMA:g} sigma of it")
        ev = [e for e in d.evidence if e.name == name and e.threshold == pytest.approx(thr, abs=10 ** -digits)]
        if d.verdict == "YES":  # a defining feature cited as present, against its detection level
            ev += [dataclasses.replace(e, contribution=1.0) for e in d.evidence if e.name == name and e.present
                   and e.detection.threshold == pytest.approx(thr, abs=10 ** -digits)]
        if not ev or not any(sign * e.contribution > 0 or (d.verdict == "NO" and e.is_veto) for e in ev):
            problems.append(f"{name}: cited for {d.verdict} but does not pull that way ({ev})")
    for c in missing:
        meas = by_name.get(c["name"])
        if meas is None or meas.value is not None:
            problems.append(f"{c['name']}: claimed not measurable, but measured {meas}")
    return problems


def _decisions(kinds, seeds):
    for kind in kinds:
        for seed in seeds:
            sp = make_spectrum(kind, seed=seed, snr=8 + 52 * ((seed * 0.618) % 1))
            rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
            for task in TASKS:
                yield f"{kind}/{seed}/{task}", rs, task


def test_every_synthetic_justification_follows_its_numbers():
    problems, n = [], 0
    for label, rs, task in _decisions(KINDS, range(5)):
        d = decide(rs, task)
        if d.verdict is None:
            continue
        n += 1
        problems += [f"{label}: {p}" for p in check_justification(d)]
    assert n > 300
    assert not problems, "\n".join(problems[:20])


def test_answer_text_is_the_justification_after_the_box():
    sp = make_spectrum("m_giant", seed=3, snr=40)
    rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
    plan = make_plan(rs, "gm")
    d = plan.decision
    answer = final_text(plan).split("<answer>")[1]
    assert answer.startswith(f"\\boxed{{{d.verdict}}} ")
    body = answer[len(f"\\boxed{{{d.verdict}}} "):-len(".</answer>")]
    assert body[0].lower() + body[1:] == d.justification


def test_the_checker_catches_a_contradiction():
    sp = make_spectrum("m_dwarf", seed=1, snr=40)
    d = decide(RestSpectrum.from_spectrum(sp, sp.meta.redshift), "gm")
    assert d.verdict == "NO" and not check_justification(d)
    d.justification = d.justification.replace("(above", "(below", 1)
    assert check_justification(d)


def test_m_dwarf_no_cites_gravity_and_hot_continuum_is_required_for_wd():
    sp = make_spectrum("m_dwarf", seed=2, snr=40)
    rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
    gm = decide(rs, "gm")
    assert gm.verdict == "NO" and ("Na I" in gm.justification or "CaH" in gm.justification), gm.justification
    wd = decide(rs, "wd")
    assert wd.verdict == "NO" and "continuum slope" in wd.justification, wd.justification


REAL = Path(__file__).parent / "data" / "real"


@pytest.mark.real_data
def test_real_justifications_follow_their_numbers():
    from spec_vetting.io import read_spectrum

    paths = sorted((REAL / "mdwarfs").glob("*.fits"))[:15] + sorted((REAL / "lamost_dr1").glob("*.fits"))[:10]
    assert len(paths) == 25
    problems = []
    for p in paths:
        sp = read_spectrum(p)
        rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
        for task in TASKS:
            d = decide(rs, task)
            if d.verdict is not None:
                problems += [f"{p.name} {task}: {x}" for x in check_justification(d)]
    assert not problems, "\n".join(problems[:20])


def test_calibration_is_monotone_and_half_at_the_boundary():
    """p_yes rises with the score and is 0.5 where the score changes sign (a score of +0.05 gives just
    over 0.5, never 0.81)."""
    import numpy as np

    for key, t in RULES_TASKS.items():
        a, b = t.calibration
        assert a > 0 and b == 0.0, key
        ps = [t.p_yes(s) for s in np.linspace(-10, 10, 201)]
        assert all(p2 >= p1 for p1, p2 in zip(ps, ps[1:], strict=False)), key
        assert t.p_yes(0.0) == pytest.approx(0.5)
        assert 0.45 < t.p_yes(-0.05) < 0.5 < t.p_yes(0.05) < 0.6 or key in ("carbon", "ss"), key
