"""From measured diagnostics to a verdict: the data-quality gates, then the task's score and its calibration
(``tasks.py``); the verdict is YES when ``p_yes >= 0.5``.

Before a score is read, gates apply in this order:

1. redshift ``z > 0.01`` (far above stellar velocities): NO for every stellar task;
2. narrow [O III] 5007 emission stronger than Hβ: a galaxy, QSO or nebula, NO for every stellar task;
3. redshift unknown and an emission line where no star or nebula has one at rest (``redshift.py``):
   no verdict (UNDECIDED), since the diagnostics would be read at the wrong wavelengths;
4. the task's key windows must be measurable (covered, not masked, errors small enough to rule the feature in or
   out); otherwise there is no verdict and the reason says which window failed and why (the loop records it as
   UNDECIDED), unless a decisive measurement (a significantly blue continuum for a cool-star task, a red one or
   no absorption at all for a white dwarf) says NO on its own.

Then the score's terms decide only where they are significant (``scoring.TaskScore.settle``): YES needs a
significant defining feature and no veto, NO a significant term against; otherwise UNDECIDED, naming the
measurements that would have decided and the error each would need.

Only the spectrum's arrays, ivar, mask and the redshift are read, never a survey's class labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .astrometry import evidence_terms, with_terms
from .diagnostics import Measurement, RestSpectrum
from .features import nebular_lines
from .redshift import unexplained_emission
from .scoring import CAP, ScoreTerm, TaskScore, _v
from .significance import Term
from .tasks import RULES_TASKS, RulesTask, rules_task
from .variability import light_curve_terms, with_light_curve_terms

#: above this redshift an object is extragalactic (Galactic stars move at |v| < ~600 km/s, z < 0.002)
STELLAR_Z_MAX = 0.01
#: score given when a gate (redshift, nebular lines) decides NO before the task's own score
GATE_SCORE = -8.0
#: score given when a decisive measurement says NO while the task's own features could not be read
DECISIVE_SCORE = 2.0 * CAP


@dataclass
class Decision:
    """The rules engine's conclusion for one spectrum and task."""

    task: str
    class_name: str
    verdict: str | None  # "YES" | "NO" | None (= no verdict: UNDECIDED with ``reason``)
    score: float | None
    p_yes: float | None
    reason: str | None  # why there is no verdict
    justification: str
    measurements: dict[str, Measurement]
    cited: list[str]
    redshift: float
    redshift_known: bool
    evidence: list[ScoreTerm] = field(default_factory=list)  # the score's terms; the justification quotes some


def p_yes_from_score(task: str, score: float) -> float:
    """The calibrated probability of YES for ``score`` on ``task``."""
    return RULES_TASKS[task].p_yes(score)


def _nebular(rs: RestSpectrum) -> tuple[bool, dict[str, Measurement]]:
    """True when narrow [O III] 5007 emission is significant (EW < -5 Å at > 4 sigma) and stronger than Hβ's."""
    m = nebular_lines(rs)
    oiii, hb = m["ew_oiii5007"], m["ew_hb_core"]
    if not oiii.ok or _v(oiii) > -5.0 or oiii.snr < 4.0:
        return False, m
    hb_emission = max(0.0, -_v(hb)) if hb.ok else 0.0
    return -_v(oiii) > 1.5 * hb_emission, m


def decide(rs: RestSpectrum, task: str, *, redshift_known: bool = True,
           evidence: dict | None = None) -> Decision:
    """Measure the task's diagnostics on ``rs`` and decide; a verdict of None carries the reason. ``evidence``
    (the candidate's Gaia values) adds the significant astrometric terms of ``astrometry.py`` to the score."""
    fs: RulesTask | None = rules_task(task)
    if fs is None:
        reason = f"the rules engine has diagnostics for cv, carbon, ss, gm and wd only, not for task {task!r}"
        return Decision(task, task, None, None, None, reason, "", {}, [], rs.redshift, redshift_known)
    key = fs.task
    measurements = fs.measure(rs)

    # both read ``measurements`` when called: a gate below rebinds it to add the measurements it cites
    def verdict_of(score: float, evidence: list[ScoreTerm], ts: TaskScore | None, cited: list[str]) -> Decision:
        p = fs.p_yes(score)
        if ts is None:  # a gate: its one piece of evidence, then the class it rules out
            verdict = "YES" if p >= 0.5 else "NO"
            text = "; ".join(e.claim() for e in evidence) + f": not {_a(fs.class_name.lower())}"
        else:
            verdict, text = ts.settle(p)
            if verdict is None:
                return no_verdict(text, cited, evidence)
        return Decision(key, fs.class_name, verdict, score, p, None, text, measurements, cited,
                        rs.redshift, redshift_known, evidence)

    def no_verdict(reason: str, cited: list[str], evidence: list[ScoreTerm] | None = None) -> Decision:
        return Decision(key, fs.class_name, None, None, None, reason, "", measurements, cited, rs.redshift,
                        redshift_known, evidence or [])

    if redshift_known and rs.redshift > STELLAR_Z_MAX:
        zm = Measurement("the redshift z", float(rs.redshift))
        measurements = {**measurements, "redshift": zm}
        ev = ScoreTerm("redshift", Term.of(zm, STELLAR_Z_MAX, digits=4), "far above stellar velocities, an "
                      "extragalactic object", GATE_SCORE)
        return verdict_of(GATE_SCORE, [ev], None, ["redshift"])
    is_nebular, neb = _nebular(rs)
    if is_nebular:
        measurements = {**measurements, **neb}
        o3 = neb["ew_oiii5007"]
        ev = ScoreTerm("ew_oiii5007", Term.of(o3, -5.0), "strong narrow [O III] emission marks a galaxy or nebula",
                      GATE_SCORE)
        return verdict_of(GATE_SCORE, [ev], None, ["ew_oiii5007", "ew_hb_core"])
    if not redshift_known:
        # read at rest, a galaxy's or QSO's lines fall on the wrong diagnostics: no guess when it looks like one
        line = unexplained_emission(rs)
        if line is not None:
            measurements = {**measurements, "unexplained_emission": line.measurement()}
            reason = (f"the redshift is unknown and {line.describe()}: most likely a galaxy or QSO at some redshift, "
                      f"where the {fs.class_name.lower()} diagnostics would be read at the wrong wavelengths; give "
                      "the survey redshift (a DESI redrock file, or --redshift) to decide")
            return no_verdict(reason, ["unexplained_emission"])
    ts = fs.score(measurements)
    measurements = {**measurements, **ts.derived}
    if ts.score is None:
        verdict, text = ts.settle(0.0)
        if verdict is None:
            return no_verdict(text, [])
        # a decisive measurement said NO although the task's own features could not be read
        veto = [e for e in ts.decisive if e.is_veto]
        return Decision(key, fs.class_name, verdict, DECISIVE_SCORE, fs.p_yes(DECISIVE_SCORE), None, text,
                        measurements, [e.key for e in veto], rs.redshift, redshift_known, veto)
    # the significant astrometric terms move the score; a YES still needs the class's own spectral feature
    terms = evidence_terms(key, evidence)
    lc_terms = light_curve_terms(key, evidence)  # issue 38: a light curve's significant findings
    decision = verdict_of(ts.score + sum(t.contribution for t in terms + lc_terms), ts.evidence, ts, ts.cited)
    decision.justification = with_light_curve_terms(with_terms(decision.justification, terms), lc_terms)
    return decision


def _a(name: str) -> str:
    """``a``/``an`` before a class name: an m-type giant, an s-type star, a white dwarf."""
    return f"an {name}" if name[:1] in "aeiou" or name[:2] in ("m-", "s-") else f"a {name}"
