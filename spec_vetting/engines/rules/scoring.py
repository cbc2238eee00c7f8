"""Per-task scores: for each task a sum of physically motivated terms, each tied to one measured (or derived)
value with its error and a threshold. A term counts only when its value is significantly (``significance.SIGMA``
errors) on one side of its threshold, so the score is exactly the sum of its significant :class:`ScoreTerm`
contributions, capped where a requirement is unmet or a veto is significant. A positive total leans to YES, a
negative one to NO (the calibration in ``tasks.py`` maps 0 to p_yes = 0.5); ``decision.py`` turns that into a
verdict only when the significant terms support it (:meth:`TaskScore.settle`). The justification is built from
the significant terms pulling the verdict's way (:func:`justification`), each cited with its error, so it can only
say what the numbers say.

Why one file of about 650 lines: the five tasks' scores are read and tuned side by side (a confuser of one
task is the positive of another), and they share the term machinery above; one task per module would scatter the
thresholds that must be compared with each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .diagnostics import Measurement
from .significance import SIGMA, Term

#: the score is capped at this when a requirement is unmet or a veto is significant
CAP = -1.0


@dataclass(frozen=True)
class ScoreTerm:
    """One term of a score: a measured value with its error against a threshold, and what that means for the task.

    ``role``: ``"term"`` adds ``contribution`` when significant; ``"veto"`` also caps the score at :data:`CAP`
    when significantly on its NO side (a feature no member of the class shows); ``"require"`` is a feature every
    member shows: unless significantly on its YES side the score is capped (``contribution`` is then what the cap
    removed), and significantly on its NO side it is a veto. ``defining``: ``(side, level)`` for a feature of the
    class itself, present when the value is significantly on ``side`` of ``level`` (e.g. ``("above", 0.0)``: the
    band absorbs); a YES needs one present (:attr:`present`).
    """

    key: str  # key of the measurement (in Decision.measurements) the value comes from
    term: Term
    meaning: str  # what the value's side of the threshold means, e.g. "dwarf-strength"
    contribution: float  # what this term adds to the score when it counts (> 0 pulls to YES)
    role: str = "term"
    defining: tuple[str, float] | None = None
    yes_side: str = "above"  # for a veto or requirement: the side of the threshold a member of the class is on

    @property
    def name(self) -> str:
        return self.term.name

    @property
    def value(self) -> float | None:
        return self.term.value

    @property
    def error(self) -> float | None:
        return self.term.error

    @property
    def threshold(self) -> float:
        return self.term.threshold

    @property
    def unit(self) -> str:
        return self.term.unit

    @property
    def significant(self) -> bool:
        return self.term.significant()

    @property
    def counts(self) -> bool:
        """Whether the contribution is in the score: a significant term, or an unmet requirement (its cap)."""
        if self.role == "require":
            return self.contribution != 0.0
        return self.significant and self.contribution != 0.0

    @property
    def detection(self) -> Term | None:
        """For a defining feature: its value against the level where it is present."""
        if self.defining is None:
            return None
        t = self.term
        return Term(t.name, t.value, t.error, self.defining[1], t.unit, t.digits, t.why, t.no_signal)

    @property
    def present(self) -> bool:
        """A defining feature significantly present (on its side of its detection level)."""
        det = self.detection
        return det is not None and det.side() == self.defining[0]

    @property
    def is_veto(self) -> bool:
        """Significantly on the side no member of the class is on (a veto, or a requirement failed for sure)."""
        if self.role not in ("veto", "require") or not self.significant:
            return False
        return self.term.side() != self.yes_side

    @property
    def relation(self) -> str:
        """``above``/``below`` the threshold (raw side), ``not measurable`` without a value."""
        if self.value is None:
            return "not measurable"
        return "above" if self.value >= self.threshold else "below"

    def claim(self, detection: bool = False) -> str:
        """``name = value ± error unit (above|below threshold at Nσ: meaning)``, the form justifications use; a
        term without a value says ``not significant (why)`` or ``not measurable (no usable pixels: why)``.
        ``detection``: against the level where a defining feature is present instead of the score's threshold."""
        text = (self.detection if detection and self.detection is not None else self.term).text()
        return f"{text}: {self.meaning}" if self.meaning else text


@dataclass
class TaskScore:
    """What a task's scorer concluded: a score with its evidence, or why the data cannot support one."""

    score: float | None
    abstain_reason: str | None = None
    evidence: list[ScoreTerm] = field(default_factory=list)
    yes_conclusion: str = ""  # closes a YES justification, e.g. "as in an M giant"
    no_conclusion: str = ""  # ... and a NO one
    cited: list[str] = field(default_factory=list)  # keys of the measurements the score read
    derived: dict[str, Measurement] = field(default_factory=dict)  # combined measurements the evidence cites
    #: measurements that decide NO on their own when significant, checked even when the score abstains
    decisive: list[ScoreTerm] = field(default_factory=list)

    def settle(self, p_yes: float) -> tuple[str | None, str]:
        """The verdict the significant terms support and its text: ``("YES", justification)``, ``("NO", ...)``
        or ``(None, reason)`` (UNDECIDED, naming the measurements that would have decided).

        YES needs p_yes > 0.5, a defining feature significantly present and no veto; NO needs p_yes <= 0.5 and
        a significant term against (or a veto); a decisive measurement gives NO when the score has nothing
        else to go on.
        """
        if self.score is None:
            veto = next((e for e in self.decisive if e.is_veto), None)
            if veto is not None:
                return "NO", f"{veto.claim()}: {self.no_conclusion}"
            return None, self.abstain_reason or "nothing measurable decides"
        vetoes = [e for e in self.evidence if e.is_veto]
        if p_yes > 0.5 and not vetoes:
            if any(e.present for e in self.evidence):
                return "YES", justification("YES", self)
            return None, self.undecided_reason("YES")
        if vetoes or any(e.counts and e.contribution < 0 and (e.role != "require" or e.is_veto)
                         for e in self.evidence):
            return "NO", justification("NO", self)
        return None, self.undecided_reason("NO")

    def undecided_reason(self, leaning: str, max_items: int = 3) -> str:
        """Why no verdict: the score leans one way but no term decides it at SIGMA; the largest terms that were
        not significant or not measured, each with the error that would have made it decide."""
        if leaning == "YES":  # the defining features that are not present: what would have decided
            open_terms = [e for e in self.evidence if e.defining is not None and not e.present]
        else:
            open_terms = [e for e in self.evidence + self.decisive
                          if not e.significant and (e.contribution != 0.0 or e.role != "term")]
        open_terms.sort(key=lambda e: -abs(e.contribution))
        parts, seen = [], set()
        for e in open_terms:
            if e.name in seen:
                continue
            seen.add(e.name)
            term = e.detection if leaning == "YES" else e.term
            need = term.error_to_decide()
            if need is None:
                parts.append(f"{e.claim()} (measuring it would decide)")
            else:
                parts.append(f"{e.claim()} (would decide with an error below {need:.{e.term.digits}f}"
                             f"{' ' + e.unit if e.unit else ''})")
            if len(parts) == max_items:
                break
        what = (f"the score leans towards the class, but none of its own features is present at {SIGMA:g} sigma"
                if leaning == "YES" else f"none of the measured terms is significant at {SIGMA:g} sigma")
        return f"{what}; " + "; ".join(parts) if parts else what


class _Terms:
    """Accumulates a score as a sum of the significant evidence terms."""

    def __init__(self, m: dict[str, Measurement]):
        self.m = m
        self.evidence: list[ScoreTerm] = []
        self.derived: dict[str, Measurement] = {}
        self.cited: list[str] = []

    @property
    def total(self) -> float:
        """The score: the sum of the terms that count, capped at CAP when a veto is significant."""
        total = float(sum(e.contribution for e in self.evidence if e.counts))
        return min(total, CAP) if any(e.is_veto for e in self.evidence) else total

    def derive(self, key: str, meas: Measurement) -> Measurement:
        self.derived[key] = meas
        self.m = {**self.m, key: meas}
        return meas

    def _cite(self, key: str) -> None:
        if key not in self.cited:
            self.cited.append(key)

    def add(self, key: str, contribution: float, threshold: float, above: str, below: str,
            value: float | None = None, digits: int = 2, *, defining: tuple[str, float] | None = None,
            veto: str = "") -> float:
        """Add a term read from measurement ``key`` (its value, unless ``value`` is given); ``above``/``below``
        say what the value's side of ``threshold`` means. ``veto="above"`` (or ``"below"``) makes it a veto: a
        member of the class is on that side, so significantly on the other caps the score."""
        meas = self.m[key]
        term = Term.of(meas, threshold, value=value, digits=digits)
        v = term.value
        meaning = "" if v is None else (above if v >= threshold else below)
        self.evidence.append(ScoreTerm(key, term, meaning, float(contribution), "veto" if veto else "term",
                                      defining, veto or "above"))
        self._cite(key)
        return contribution

    def require(self, key: str, yes_side: str, threshold: float, yes: str, no: str, missing: str = "") -> None:
        """A feature every member of the class shows: ``key`` significantly ``yes_side`` (``"above"`` or
        ``"below"``) of ``threshold``; ``yes``/``no`` say what the value's side means. Unless it is, the score is
        capped at CAP by this term; significantly on the other side it is a veto."""
        meas = self.m.get(key)
        if meas is None:
            meas = Measurement(key, None, why=missing or "not measured")
        term = Term.of(meas, threshold)
        met = term.side() == yes_side
        contribution = 0.0 if met else -max(self.total - CAP, 0.0)
        if not term.measured:
            text = missing or no
        else:
            text = yes if (term.value >= threshold) == (yes_side == "above") else no
        self.evidence.append(ScoreTerm(key, term, text, contribution, "require", None, yes_side))
        if meas.ok:
            self._cite(key)

    def decisive(self, key: str, yes_side: str, threshold: float, meaning: str) -> ScoreTerm:
        """A measurement that alone says NO when significantly off ``yes_side`` of ``threshold``."""
        meas = self.m[key]
        return ScoreTerm(key, Term.of(meas, threshold), meaning, 0.0, "veto", None, yes_side)

    def result(self, yes: str, no: str, decisive: list[ScoreTerm] | None = None) -> TaskScore:
        return TaskScore(self.total, evidence=self.evidence, yes_conclusion=yes, no_conclusion=no,
                         cited=self.cited, derived=self.derived, decisive=decisive or [])


def justification(verdict: str, ts: TaskScore, max_claims: int = 3) -> str:
    """A short sentence after ``\\boxed{verdict}``: the largest significant terms pulling the verdict's way (vetoes
    first for NO), each with its value, error and side of the threshold, then the task's conclusion. Never a
    claim the numbers contradict, never a feature that is not significant."""
    sign = 1.0 if verdict == "YES" else -1.0
    vetoes = [e for e in ts.evidence if e.is_veto] if verdict == "NO" else []
    pro = sorted((e for e in ts.evidence if e.significant and sign * e.contribution > 0 and e not in vetoes
                  and e.role != "require"), key=lambda e: -abs(e.contribution))
    claims = [e.claim() for e in vetoes + pro]
    if verdict == "YES":  # the class's own features that are present come first, cited against their level
        present = [e for e in ts.evidence if e.present]
        claims = [e.claim() if e.significant and e.contribution > 0 else e.claim(detection=True)
                  for e in present] + claims
    by_name: dict[str, str] = {}
    for c in claims:  # one claim per measurement (a veto and a term may read the same one)
        by_name.setdefault(c.split(" = ")[0].split(" not ")[0], c)
    claims = list(by_name.values())[:max_claims]
    conclusion = ts.yes_conclusion if verdict == "YES" else ts.no_conclusion
    if not claims:  # settle() gives a verdict only with a significant term its way; kept for safety
        return f"no measured feature decides clearly: {conclusion}"
    return "; ".join(claims) + f": {conclusion}"


def _v(m: Measurement, default: float = 0.0) -> float:
    return default if m.value is None else float(m.value)


def _usable(m: Measurement, max_error: float) -> bool:
    return m.ok and (m.error is None or m.error <= max_error)


def _clip(x: float, lo: float, hi: float) -> float:
    return float(min(hi, max(lo, x)))


def _abstain_unless_any(
    m: dict[str, Measurement], keys: tuple[str, ...], max_error: float, what: str
) -> TaskScore | None:
    """The data-quality gate every task starts with: at least one of its key diagnostics must be usable (measured
    with an error at most ``max_error``); otherwise no score, and the reason names each window and what failed."""
    if any(_usable(m[k], max_error) for k in keys):
        return None
    parts = []
    for x in (m[k] for k in keys):
        if not x.ok:
            parts.append(f"{x.name}: {x.why}")
        else:
            parts.append(f"{x.name} = {x.value:.2f} ± {x.error:.2f} (error above {max_error:g}: S/N too low)")
    return TaskScore(None, f"{what} cannot be measured: " + "; ".join(parts))


def _weighted(m: dict[str, Measurement], weights: dict[str, float], max_error: float, name: str,
              unit: str = "") -> Measurement | None:
    """Weighted mean of the usable measurements among ``weights``, with its propagated error; None if none."""
    used = [(k, w) for k, w in weights.items() if _usable(m[k], max_error)]
    if not used:
        return None
    total = sum(w for _, w in used)
    value = sum(w * _v(m[k]) for k, w in used) / total
    error = float(np.sqrt(sum((w * (m[k].error or 0.0)) ** 2 for k, w in used)) / total)
    label = f"{name} ({', '.join(m[k].name.split(' depth')[0] for k, _ in used)})"
    windows = tuple(win for k, _ in used for win in m[k].windows)
    return Measurement(label, float(value), error, unit, windows=windows)


#: a continuum significantly bluer than this (α of F_λ ∝ λ^α) is no cool star's: it decides NO for the carbon,
#: S-star and M-giant tasks on its own. F_λ falling to the red means hotter than about a K0 star; the members
#: are far redder (synthetic positives: α >= 0.84 for gm, 2.3 for ss, 3.0 for carbon; the real M2 star 3.1),
#: the real G stars here -0.5 to -1.4, the A stars -1.8 to -2.6; reddening only makes a star redder
COOL_STAR_SLOPE_MIN = 0.0


def _cool_star_slope(m: dict[str, Measurement]) -> list[ScoreTerm]:
    """The decisive term of the cool-star tasks: the continuum slope against :data:`COOL_STAR_SLOPE_MIN`."""
    if "slope" not in m:
        return []
    term = Term.of(m["slope"], COOL_STAR_SLOPE_MIN)
    meaning = ("a continuum too blue for a cool star" if term.measured and term.value < COOL_STAR_SLOPE_MIN
               else "a continuum red enough for a cool star")
    return [ScoreTerm("slope", term, meaning, 0.0, "veto", None, "above")]


def _with_decisive(ts: TaskScore, decisive: list[ScoreTerm], no: str) -> TaskScore:
    """An abstaining score that still carries the measurements able to decide NO alone."""
    ts.decisive = decisive
    ts.no_conclusion = no
    ts.cited = [e.key for e in decisive if e.is_veto]
    return ts


def score_cv(m: dict[str, Measurement]) -> TaskScore:
    """Balmer emission (negative EW) in Hα and Hβ, helped by He I/He II emission, broad or double-peaked profiles.

    Terms: Hα emission against 20 Å (0.5 per 10 Å), Hβ emission against 6.25 Å (0.8 per 5 Å; a CV's decrement is
    flat, so Hβ weighs more than in an M dwarf's chromosphere), He I 5876 and He II 4686 against 0 (0.3 per 2 Å),
    +1 for FWHM ≥ 15 Å (≥ 700 km/s), -0.5 below 8 Å, +1 for two peaks, -1.5 when [S II] is strong against Hα
    (H II region), -3 when Hβ emission comes without the stronger Hα emission of every CV. A second branch scores
    a disc in outburst; the larger of the two is the score.
    """
    if (abstain := _abstain_unless_any(m, ("ew_ha", "ew_hb"), 4.0, "the Balmer emission diagnostics")) is not None:
        return abstain
    t = _Terms(m)
    e_ha = -_v(m["ew_ha"]) if _usable(m["ew_ha"], 4.0) else 0.0
    e_hb = -_v(m["ew_hb"]) if _usable(m["ew_hb"], 4.0) else 0.0
    if _usable(m["ew_ha"], 4.0):
        t.add("ew_ha", 0.5 * (_clip(e_ha / 10.0, -1.0, 5.0) - 2.0), -20.0, "not the strong emission of a CV",
              "strong Balmer emission", defining=("below", 0.0))
    if _usable(m["ew_hb"], 4.0):
        t.add("ew_hb", 0.8 * (_clip(e_hb / 5.0, -1.0, 5.0) - 1.25), -6.25, "not the strong emission of a CV",
              "strong Hβ emission", defining=("below", 0.0))
    if e_hb > 0 and _usable(m["ew_hg"], 4.0):
        t.add("ew_hg", 0.2 * _clip(-_v(m["ew_hg"]) / 4.0, 0.0, 4.0), 0.0, "no Hγ emission", "Hγ in emission")
    for k in ("ew_hei5876", "ew_heii4686"):
        if _usable(m[k], 2.0):
            t.add(k, 0.3 * _clip(-_v(m[k]) / 2.0, -1.0, 3.0), 0.0, "in absorption", "in emission")
    widths = [k for k in ("fwhm_ha", "fwhm_hb") if m[k].ok]
    if widths:
        k = max(widths, key=lambda k: _v(m[k]))
        w = _v(m[k])
        t.add(k, 1.0 if w >= 15.0 else (-0.5 if w < 8.0 else 0.0), 15.0 if w >= 8.0 else 8.0,
              "broad, as in an accretion disc", "narrow, as in a chromosphere or H II region")
    if m["dp_ha"].ok and _v(m["dp_ha"]) > 300.0:
        t.add("dp_ha", 1.0, 300.0, "double-peaked, as in a disc", "")
    if _usable(m["ew_ha"], 4.0) and e_hb > 5.0 and e_ha < 0.3 * e_hb:
        # Hβ emission without the stronger Hα a CV always shows: a redshifted line of something else
        t.add("ew_ha", -3.0, -0.3 * e_hb, "weaker than Hβ's emission, which no CV shows",
              "weaker than Hβ's emission, which no CV shows")
    if _usable(m["ew_sii"], 2.0) and -_v(m["ew_sii"]) > max(2.0, 0.2 * e_ha):
        t.add("ew_sii", -1.5, -max(2.0, 0.2 * e_ha), "", "strong [S II], as in an H II region")
    # every CV in quiescence shows Hα in emission (an outburst's absorption is scored by _cv_outburst)
    t.require("ew_ha", "below", 0.0, "Hα emission, as in every quiescent CV",
              "Hα in absorption, where every quiescent CV shows emission", missing="no usable Hα")
    out = t.result("as in an accreting cataclysmic variable", "not a cataclysmic variable")
    outburst = _cv_outburst(m)
    # where broad Balmer absorption could be a disc in outburst (no significant veto of that reading), the
    # quiescent reading's NO (Hα in absorption) is no NO: the outburst reading decides, or leaves it undecided
    if outburst is not None and outburst.score > out.score and not any(e.is_veto for e in outburst.evidence):
        return outburst
    return out


def _cv_outburst(m: dict[str, Measurement]) -> TaskScore | None:
    """A disc in outburst: Balmer absorption of intermediate width (FWHM 25-65 Å; A stars are narrower, white
    dwarfs broader), shallow (EW(Hβ ±50 Å) 4-18 Å; a white dwarf's is deeper), higher-order lines merged
    (H9 contrast below 0.15) and a hot continuum (α below -1.8). Each violated limit costs; +1.5 when all hold,
    carried by the FWHM term."""
    keys = ("fwhm_hb_abs", "ew_hb_wide", "h9_contrast", "slope")
    if not all(m[k].ok for k in keys) or not _usable(m["ew_hb_wide"], 4.0) or not _usable(m["h9_contrast"], 0.1):
        return None
    fwhm, ew, h9, slope = (_v(m[k]) for k in keys)
    t = _Terms(m)
    f_cost = 0.15 * max(0.0, 25.0 - fwhm) + 0.3 * max(0.0, fwhm - 65.0)
    # the term is positive between 15 and 70 Å: up to 70 Å it counts when significantly broader than 15 Å (an A
    # star's lines are narrower); above, when significantly broader than 70 Å, as a veto (a white dwarf's)
    edge = 15.0 if fwhm <= 70.0 else 70.0
    t.add("fwhm_hb_abs", 1.5 - f_cost, edge,
          "broader than a disc in outburst" if fwhm > 70.0 else "of the width of a disc in outburst",
          "of the width of a disc in outburst" if fwhm > 70.0 else "narrower than a disc in outburst",
          defining=("above", 15.0), veto="below" if fwhm > 70.0 else "")
    if ew > 18.0 or ew < 4.0:
        t.add("ew_hb_wide", -0.3 * max(0.0, ew - 18.0) - 0.3 * max(0.0, 4.0 - ew), 18.0 if ew > 18.0 else 4.0,
              "deeper than a disc in outburst", "too shallow for a disc in outburst")
    else:
        t.add("ew_hb_wide", 0.0, 4.0, "shallow, as in a disc in outburst", "")
    t.add("h9_contrast", -20.0 * max(0.0, h9 - 0.15), 0.15, "H9 stands apart, not merged", "higher-order lines merged")
    t.add("slope", -2.0 * max(0.0, slope + 1.8), -1.8, "not a hot continuum", "a hot continuum")
    return t.result("broad, shallow Balmer absorption with merged higher-order lines in a hot continuum, as in a "
                    "dwarf nova in outburst", "not a cataclysmic variable")


#: mean C2 depth where the carbon score changes sign (between the classes on the calibration seeds)
CARBON_C2_ZERO = 0.22
#: mean ZrO depth where the S-star score changes sign
SS_ZRO_ZERO = 0.155


def score_carbon(m: dict[str, Measurement]) -> TaskScore:
    """Mean C2 Swan band depth (5165 and 5636 weigh 1, 4737 weighs 0.5) against 0.22, ×12; CN 4216 depth ×2;
    −2 when TiO 7054 is deep (> 0.15) and C2 shallow (< 0.1).

    The C2 heads absorb blueward; the TiO 5167 head and Mg b absorb redward, so an M or K star gives a negative
    C2 5165 depth.
    """
    decisive = _cool_star_slope(m)
    if (abstain := _abstain_unless_any(m, ("c2_5165", "c2_5636"), 0.08, "the C2 Swan band heads")) is not None:
        return _with_decisive(abstain, decisive, "not a carbon star")
    t = _Terms(m)
    t.evidence += decisive
    t.cited += [e.key for e in decisive]
    c2m = t.derive("c2_mean", _weighted(m, {"c2_5165": 1.0, "c2_5636": 1.0, "c2_4737": 0.5}, 0.08, "mean C2 depth"))
    c2 = _v(c2m)
    t.add("c2_mean", 12.0 * (c2 - CARBON_C2_ZERO), CARBON_C2_ZERO,
          "deep C2 Swan bands absorbing blueward of their heads", "little or reversed C2 absorption",
          defining=("above", 0.0))
    if _usable(m["cn_4216"], 0.1):
        t.add("cn_4216", 2.0 * _clip(_v(m["cn_4216"]), -0.2, 0.5), 0.0, "CN absorbs", "no CN absorption")
    if _usable(m["tio_7054"], 0.05) and _v(m["tio_7054"]) > 0.15 and c2 < 0.1:
        t.add("tio_7054", -2.0, 0.15, "TiO bands of an oxygen-rich star", "")
    return t.result("the signature of a carbon star", "not a carbon star", decisive)


def score_ss(m: dict[str, Measurement]) -> TaskScore:
    """Mean ZrO band depth (6474 and 5551 weigh 1, 4640 weighs 0.5) against 0.155, ×10; a cool (red) continuum.

    Hot stars' Hα wings depress 6478-6520 Å a little, so the slope term (0.5 per unit of α against 1, from -1.5
    to +1) costs blue stars; C2 bands (a carbon star, not an S star) cost 4 per 0.1 of depth above 0.1.
    """
    decisive = _cool_star_slope(m)
    if (abstain := _abstain_unless_any(m, ("zro_6474", "zro_5551"), 0.08, "the ZrO bands")) is not None:
        return _with_decisive(abstain, decisive, "not an S-type star")
    t = _Terms(m)
    t.evidence += decisive
    zm = t.derive("zro_mean", _weighted(m, {"zro_6474": 1.0, "zro_5551": 1.0, "zro_4640": 0.5}, 0.08,
                                        "mean ZrO depth"))
    t.add("zro_mean", 10.0 * (_v(zm) - SS_ZRO_ZERO), SS_ZRO_ZERO, "ZrO bands absorbing redward of their heads",
          "ZrO bands absent or weaker than an S star's", defining=("above", 0.0))
    if m["slope"].ok:
        t.add("slope", 0.5 * _clip(_v(m["slope"]) - 1.0, -3.0, 2.0), 1.0, "a cool star's red continuum",
              "a continuum too blue for an S star")
    if _usable(m["c2_5165"], 0.08) and _v(m["c2_5165"]) > 0.1:
        t.add("c2_5165", -4.0 * (_v(m["c2_5165"]) - 0.1) * 10, 0.1, "C2 bands of a carbon star", "")
    if _usable(m["tio_6159"], 0.05):
        t.cited.append("tio_6159")
    return t.result("in a cool star, the mark of an S star", "not an S-type star", decisive)


#: the TiO level (mean depth) and continuum slope a giant's score is measured from: with them the free logistic fit
#: on the calibration seeds puts its p = 0.5 boundary at score 0
GM_TIO_ZERO = 0.05
#: CaH 6830 depth a giant's TiO alone gives: 0.1 + 0.5 × TiO 7054 depth (above it, CaH is a dwarf's)
GM_SLOPE_ZERO = 0.7
#: YES needs at least this mean TiO depth (M0 and later); below it the score is capped at -1
GM_TIO_MIN = 0.10
GM_CAH_BASE, GM_CAH_PER_TIO = 0.10, 0.5
#: CaH 6975 (PMSU CaH3) depth above which CaH is a dwarf's (giants: about 0; M0-M4 dwarfs 0.1-0.35)
GM_CAH3_MAX = 0.08
#: Na I 8183/8195 EW (Å) above which the doublet is a dwarf's (giants: ≤ 1.5 Å at low resolution)
GM_NAI_MAX = 1.8


def score_gm(m: dict[str, Measurement]) -> TaskScore:
    """An M giant: TiO bands of an M star, a red continuum, and **low gravity**.

    Terms: mean TiO depth (7054, 6159, 8432) against 0.05, ×8 (−2 more below 0.08: not an M star); continuum
    slope α against 0.7 (×1.5, from −3 to +2.25). Gravity (Reid, Hawley & Gizis 1995 PMSU CaH2/CaH3 against TiO5;
    Na I 8183/8195 as in Schiavon et al. 1997 and Mann et al. 2012): CaH 6830 depth above what a giant's TiO
    gives (0.1 + 0.5 × TiO 7054 depth) costs 30 per unit, CaH 6975 (CaH3) depth above 0.08 costs 30 per unit,
    Na I EW above 1.8 Å costs 2 per Å (below it adds up to 0.5), Ca II 8542 EW adds 0.4 per Å around 2 Å (strong
    in giants). So a strong CaH or Na I pulls to NO whatever the TiO (a veto when significant). YES needs a mean
    TiO depth significantly above 0.10 (an M star; K giants have less; otherwise the score is capped at -1) and a
    giant's gravity feature at 3 sigma (CaH 6830 below a giant's level, Na I below 1.8 Å or Ca II 8542 above 2 Å):
    TiO alone says M star, not giant. A continuum significantly bluer than flat decides NO on its own. C2 bands
    (carbon star) cost 20 per unit depth above 0.1, ZrO bands (S star) 30 per unit mean depth above 0.03. An M star
    (TiO depth ≥ 0.08) none of whose gravity features can be measured gets no verdict: TiO alone does not give the
    luminosity class.
    K I 7699 and Ca I 6162 are measured and shown but not scored: at LAMOST resolution they do not separate the real
    dwarfs from giants here.
    """
    decisive = _cool_star_slope(m)
    if (abstain := _abstain_unless_any(m, ("tio_7054", "tio_6159"), 0.05, "the TiO bands")) is not None:
        return _with_decisive(abstain, decisive, "not an M giant")
    gravity = ("cah_6830", "cah_6975", "ew_nai")
    tio_any = max((_v(m[k]) for k in ("tio_7054", "tio_6159") if _usable(m[k], 0.05)), default=0.0)
    if tio_any >= 0.08 and not any(_usable(m[k], 0.05 if k != "ew_nai" else 1.0) for k in gravity):
        # an M star whose luminosity class cannot be read: no verdict rather than a guess from TiO alone
        return _with_decisive(_abstain_unless_any(m, gravity, 0.0, "the gravity-sensitive features (luminosity class)"),
                              decisive, "not an M giant")
    t = _Terms(m)
    t.evidence += decisive
    tm = t.derive("tio_mean", _weighted(m, {"tio_7054": 1.0, "tio_6159": 1.0, "tio_8432": 1.0}, 0.05,
                                        "mean TiO depth"))
    tio = _v(tm)
    t.add("tio_mean", 8.0 * (tio - GM_TIO_ZERO), GM_TIO_ZERO, "TiO bands of an M star",
          "TiO bands too weak for an M giant")
    if tio < 0.08:
        t.add("tio_mean", -2.0, 0.08, "", "TiO bands too weak for an M star")
    if m["slope"].ok:  # cool: M giants are red (α > 1 between 5400 and 8130 Å); K stars bluer
        t.add("slope", 1.5 * _clip(_v(m["slope"]) - GM_SLOPE_ZERO, -2.0, 1.5), GM_SLOPE_ZERO,
              "a cool star's red continuum", "a continuum too blue for an M giant")
    if _usable(m["cah_6830"], 0.05) and _usable(m["tio_7054"], 0.05):
        cah, tio7 = m["cah_6830"], m["tio_7054"]
        excess = _v(cah) - (GM_CAH_BASE + GM_CAH_PER_TIO * _v(tio7))
        err = float(np.hypot(cah.error or 0.0, GM_CAH_PER_TIO * (tio7.error or 0.0)))
        t.derive("cah_excess", Measurement("CaH 6830 depth above a giant's (0.1 + 0.5 × TiO 7054)", excess, err,
                                           windows=cah.windows + tio7.windows))
        t.add("cah_excess", -30.0 * max(0.0, excess) + 5.0 * _clip(-excess, 0.0, 0.1), 0.0,
              "CaH of a dwarf, high gravity", "CaH as weak as a giant's", defining=("below", 0.0),
              veto="below")
    if _usable(m["cah_6975"], 0.05):
        t.add("cah_6975", -30.0 * max(0.0, _v(m["cah_6975"]) - GM_CAH3_MAX), GM_CAH3_MAX,
              "CaH of a dwarf, high gravity", "CaH as weak as a giant's", veto="below")
    if _usable(m["ew_nai"], 1.0):
        nai = _v(m["ew_nai"])
        t.add("ew_nai", -2.0 * max(0.0, nai - GM_NAI_MAX) + 0.5 * _clip(GM_NAI_MAX - nai, 0.0, 1.0), GM_NAI_MAX,
              "dwarf-strength Na I, high gravity", "Na I as weak as a giant's",
              defining=("below", GM_NAI_MAX), veto="below")
    if _usable(m["ew_cat"], 1.0):
        t.add("ew_cat", 0.4 * _clip(_v(m["ew_cat"]) - 2.0, -2.0, 2.0), 2.0, "a giant's strong Ca II triplet",
              "a weak Ca II triplet, as in a dwarf", defining=("above", 2.0))
    if _usable(m["c2_5165"], 0.08) and _v(m["c2_5165"]) > 0.1:
        t.add("c2_5165", -20.0 * (_v(m["c2_5165"]) - 0.1), 0.1, "C2 bands of a carbon star", "")
    zro = _weighted(m, {"zro_6474": 1.0, "zro_5551": 1.0}, 0.08, "mean ZrO depth")
    if zro is not None and _v(zro) > 0.03:
        t.derive("zro_mean", zro)
        t.add("zro_mean", -30.0 * (_v(zro) - 0.03), 0.03, "ZrO bands of an S star", "")
    for k in ("ew_ki", "ew_cai"):
        if k in m and m[k].ok:
            t.cited.append(k)
    # a K star's weak TiO with a giant's gravity is not an M giant, whatever the other terms
    t.require("tio_mean", "above", GM_TIO_MIN, "TiO bands of an M star (M0 and later)",
              "TiO bands too weak for an M star")
    return t.result("as in an M giant", "not an M giant", decisive)


#: a white dwarf's continuum is blue: α below this (F_λ ∝ λ^α, 4600-6070 Å); real DA/DB: α < -1
WD_SLOPE_MAX = -0.5
#: broad Balmer absorption: mean FWHM (Å) and mean EW (Å) at least these
WD_FWHM_MIN, WD_EW_MIN = 20.0, 5.0


def score_wd(m: dict[str, Measurement]) -> TaskScore:
    """DA: Balmer FWHM against 40 Å (0.08 per Å), EW against 29 Å (0.1 per Å), merged higher-order lines (H9
    contrast below 0.3), a hot continuum (α against -1.5). DB: He I 4471/5876 absorption in a hot star without
    Balmer lines. The score is the larger of the two.

    YES needs both a blue continuum (α below -0.5, measured) and, for a DA, broad Balmer absorption (mean FWHM of
    at least 20 Å and mean EW of at least 5 Å, measured); failing either caps the score at -1 whatever else.
    """
    decisive, decisive_derived = _wd_decisive(m)
    if (abstain := _abstain_unless_any(m, ("ew_hb", "ew_hg"), 5.0, "the Balmer line profiles")) is not None:
        abstain.derived.update(decisive_derived)
        return _with_decisive(abstain, decisive, "not a white dwarf")
    used = [k for k in ("ew_hb", "ew_hg") if _usable(m[k], 5.0)]
    ewm = _weighted(m, {k: 1.0 for k in used}, 5.0, "mean Balmer EW", "Å")
    widths = {k: 1.0 for k in ("fwhm_hb", "fwhm_hg", "fwhm_hd") if m[k].ok}
    fwm = _weighted(m, widths, float("inf"), "mean Balmer absorption FWHM", "Å") if widths else None
    da, db = _Terms(m), _Terms(m)
    ew = _v(ewm)
    for t in (da, db):
        t.derive("ew_balmer", ewm)
        if fwm is not None:
            t.derive("fwhm_balmer", fwm)
        else:
            t.derive("fwhm_balmer", Measurement("mean Balmer absorption FWHM", None, unit="Å",
                                                why="no Balmer absorption profile measurable"))
    slope_ok = m["slope"].ok
    slope = _v(m["slope"])
    # DA
    if fwm is not None:
        da.add("fwhm_balmer", 0.08 * (_v(fwm) - 40.0), 40.0, "pressure-broadened, as in a white dwarf",
               "too narrow for a white dwarf", defining=("above", WD_FWHM_MIN))
    da.add("ew_balmer", 0.1 * (ew - 29.0), 29.0, "deep Balmer absorption", "too weak for a white dwarf",
           defining=("above", WD_EW_MIN))
    if slope_ok:
        da.add("slope", 0.5 * _clip(-slope - 1.5, -2.0, 2.0), -1.5, "a continuum too red for a hot white dwarf",
               "a hot blue continuum")
    if _usable(m["ew_ha_core"], 3.0) and _v(m["ew_ha_core"]) < -3.0:
        # Balmer emission: an accreting system (CV) or a chromosphere, not a bare white dwarf
        da.add("ew_ha_core", -0.3 * (-_v(m["ew_ha_core"]) - 3.0), -3.0, "", "Hα in emission, not a bare white dwarf")
    if _usable(m["h9_contrast"], 0.15):
        da.add("h9_contrast", 2.0 * _clip(0.3 - _v(m["h9_contrast"]), -0.5, 0.3), 0.3,
               "H9 stands apart, as in an A star", "higher-order lines merged")
    # DB
    if slope_ok:
        db.add("slope", _clip(-slope - 1.5, -3.0, 1.0), -1.5, "a continuum too red for a hot white dwarf",
               "a hot blue continuum")
    db.add("ew_balmer", -0.2 * max(ew, 0.0), 0.0, "hydrogen lines present, not a DB", "no hydrogen absorption")
    for k, w in (("ew_hei4471", 0.8), ("ew_hei5876", 0.5)):
        if _usable(m[k], 1.5):
            db.add(k, w * _clip(_v(m[k]) - 2.0, -3.0, 3.0), 2.0, "He I absorption", "no He I absorption",
                   defining=("above", 0.0))
    # the requirements: a blue continuum (both), broad Balmer absorption (DA)
    for t in (da, db):
        t.require("slope", "below", WD_SLOPE_MAX, "the blue continuum of a white dwarf",
                  "not the blue continuum of a white dwarf",
                  missing="no continuum slope, so no evidence of a hot continuum")
    da.require("fwhm_balmer", "above", WD_FWHM_MIN, "broad Balmer absorption", "no broad Balmer absorption",
               missing="no broad Balmer absorption measured")
    da.require("ew_balmer", "above", WD_EW_MIN, "Balmer absorption", "no broad Balmer absorption")
    if db.total > da.total:
        return db.result("He I absorption in a hot continuum without hydrogen, as in a DB white dwarf",
                         "not a white dwarf", decisive)
    return da.result("as in a DA white dwarf", "not a white dwarf", decisive)


def _wd_decisive(m: dict[str, Measurement]) -> tuple[list[ScoreTerm], dict[str, Measurement]]:
    """What rules a white dwarf out alone: a continuum significantly redder than WD_SLOPE_MAX, or Balmer absorption
    significantly below WD_EW_MIN together with both He I lines significantly below 2 Å (neither DA nor DB)."""
    slope = Term.of(m["slope"], WD_SLOPE_MAX)
    out = [ScoreTerm("slope", slope, "not the blue continuum of a white dwarf" if slope.measured and
                    slope.value >= WD_SLOPE_MAX else "the blue continuum of a white dwarf", 0.0, "veto", None,
                    "below")]
    balmer = _weighted(m, {k: 1.0 for k in ("ew_hb", "ew_hg") if m[k].ok}, float("inf"), "mean Balmer EW", "Å")
    he = [Term.of(m[k], 2.0) for k in ("ew_hei4471", "ew_hei5876")]
    if balmer is None or not all(h.below() for h in he):
        return out, {}
    he_text = " and ".join(h.quantity() for h in he)
    out.append(ScoreTerm("ew_balmer_any", Term.of(balmer, WD_EW_MIN), f"no Balmer absorption, and no He I "
                        f"absorption either ({he_text})", 0.0, "veto", None, "above"))
    return out, {"ew_balmer_any": balmer}
