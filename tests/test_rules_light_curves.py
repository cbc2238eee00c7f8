"""The rules engine's light-curve terms and the review queue's light-curve disagreement (issue 38).

The evidence values are written out by hand (a summary as the match would give it), so the expected terms follow
from the documented thresholds alone (spec_vetting/evidence/variability.py: outburst >= 1 mag, flickering chi2_red
>= 10 with a von Neumann ratio >= 1, constant chi2_red <= 3 over >= 730 days, long-period amplitude >= 1 mag with
a von Neumann ratio <= 0.5, strong variability >= 0.5 mag; each beyond 3 sigma) and the documented weights (cv +-2,
gm/carbon +1, wd -1).
"""

from __future__ import annotations

import json

import pytest

from spec_vetting.analysis.confidence import review_reasons
from spec_vetting.engines.rules.decision import decide
from spec_vetting.engines.rules.diagnostics import RestSpectrum
from spec_vetting.engines.rules.variability import light_curve_terms
from spec_vetting.synthetic.synthetic import make_spectrum


def band(name="ztf", b="r", **values) -> dict:
    """A band's summary as evidence values (a steady, well-sampled star unless told otherwise)."""
    s = {"n_epochs": 300, "n_invalid": 0, "n_good": 300, "span_days": 1400.0, "median_mag": 16.0,
         "amplitude": 0.07, "amplitude_error": 0.028, "amplitude_sigma": 0.1, "chi2_red": 1.05,
         "chi2_red_error": 0.082, "von_neumann": 2.0, "max_brightening_mag": 0.06, "max_brightening_error": 0.02,
         "max_brightening_sigma": 3.0, "n_episodes": 0, "reason": None}
    s.update(values)
    return {f"{name}_kind": "light_curve", f"{name}_sep_arcsec": 0.1, f"{name}_n_within": 1,
            **{f"{name}_{b}_{k}": v for k, v in s.items()}}


def test_outburst_counts_for_cv_only_beyond_three_sigma_and_is_cited():
    # 1.16 +- 0.05 mag is 3.2 sigma beyond 1 mag; 1.12 +- 0.05 only 2.4 sigma
    (t,) = light_curve_terms("cv", band(max_brightening_mag=1.16, max_brightening_error=0.05, n_episodes=1,
                                        chi2_red=5.0))
    assert t.contribution == 2.0 and "ztf r largest brightening = 1.16 ± 0.05 mag (above 1.00 mag at 3.2σ)" in \
        t.sentence()
    assert light_curve_terms("cv", band(max_brightening_mag=1.12, max_brightening_error=0.05, n_episodes=1,
                                        chi2_red=5.0)) == []
    # an outburst says nothing about gm, carbon or wd here (amplitude small)
    for task in ("gm", "carbon", "wd", "ss"):
        assert light_curve_terms(task, band(max_brightening_mag=3.0, n_episodes=2, chi2_red=5.0)) == []


def test_flickering_and_constant_for_cv():
    # chi2_red 14 +- 0.082 with von Neumann 1.9: flickering, +2; the same slow (0.3): not flickering
    (t,) = light_curve_terms("cv", band(chi2_red=14.0, von_neumann=1.9))
    assert t.contribution == 2.0 and "flickering" in t.meaning
    assert light_curve_terms("cv", band(chi2_red=14.0, von_neumann=0.3)) == []
    # constant over 3.8 yr: chi2_red 1.05 +- 0.082 is 23.8 sigma below 3; -2
    (c,) = light_curve_terms("cv", band())
    assert c.contribution == -2.0 and "reduced chi-square = 1.05 ± 0.08" in c.sentence()
    # under two years, or 2.9 +- 0.082 (1.2 sigma below 3): nothing
    assert light_curve_terms("cv", band(span_days=600.0)) == []
    assert light_curve_terms("cv", band(chi2_red=2.9)) == []
    # a steady g band beside an outbursting r band: the outburst counts, the steadiness does not
    ev = {**band(b="g"), **band(b="r", max_brightening_mag=3.0, max_brightening_error=0.05, n_episodes=2,
                                chi2_red=50.0, von_neumann=0.8)}
    assert [t.contribution for t in light_curve_terms("cv", ev)] == [2.0]


def test_long_period_for_giants_and_strong_variability_against_white_dwarfs():
    mira = band(amplitude=2.5, amplitude_error=0.04, chi2_red=900.0, von_neumann=0.1,
                max_brightening_mag=1.3, max_brightening_error=0.03, n_episodes=4)
    for task in ("gm", "carbon"):
        (t,) = light_curve_terms(task, mira)
        assert t.contribution == 1.0 and "5-95% amplitude = 2.50 ± 0.04 mag (above 1.00 mag" in t.sentence()
    # the same amplitude varying from epoch to epoch is not long-period
    assert light_curve_terms("gm", {**mira, "ztf_r_von_neumann": 1.8}) == []
    (w,) = light_curve_terms("wd", band(amplitude=0.8, amplitude_error=0.05))
    assert w.contribution == -1.0
    assert light_curve_terms("wd", band(amplitude=0.6, amplitude_error=0.05)) == []  # 2 sigma beyond 0.5


def test_a_band_with_a_reason_gives_no_term():
    ev = band(n_good=3, median_mag=None, amplitude=None, chi2_red=None, reason="too few good epochs (3 < 5)")
    for task in ("cv", "gm", "wd"):
        assert light_curve_terms(task, ev) == []


def _rs(kind: str):
    sp = make_spectrum(kind, seed=3, snr=40)
    return RestSpectrum.from_spectrum(sp, sp.meta.redshift)


def test_decide_adds_the_light_curve_terms_and_cites_them():
    rs = _rs("cv")
    plain = decide(rs, "cv")
    outburst = band(max_brightening_mag=3.0, max_brightening_error=0.05, n_episodes=2, chi2_red=60.0,
                    von_neumann=0.9)
    d = decide(rs, "cv", evidence=outburst)
    assert d.score == pytest.approx(plain.score + 2.0)
    assert "light curve: ztf r largest brightening = 3.00 ± 0.05 mag" in d.justification
    steady = decide(rs, "cv", evidence=band())
    assert steady.score == pytest.approx(plain.score - 2.0) and "constant within its errors" in steady.justification
    # a run without light curves: exactly as before
    assert decide(rs, "cv", evidence={"gaia_abs_g": None}).justification == plain.justification


def _row(task, verdict, evidence):
    return {"verdict": verdict, "task": task, "status": "ok", "p_yes": 0.95 if verdict == "YES" else 0.05,
            "evidence_extra": json.dumps(evidence)}


def test_review_queue_flags_a_yes_that_a_significant_light_curve_contradicts():
    assert "evidence_disagrees" in review_reasons(_row("cv", "YES", band()))  # steady over 3.8 yr
    assert "evidence_disagrees" not in review_reasons(_row("cv", "NO", band()))
    assert "evidence_disagrees" not in review_reasons(_row("cv", "YES", band(span_days=500.0)))
    strong = band(amplitude=0.9, amplitude_error=0.03)
    assert "evidence_disagrees" in review_reasons(_row("wd", "YES", strong))
    assert "evidence_disagrees" not in review_reasons(_row("wd", "YES", band()))
    assert "evidence_disagrees" not in review_reasons(_row("gm", "YES", band()))
