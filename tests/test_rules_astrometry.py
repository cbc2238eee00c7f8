"""The rules engine's astrometric evidence terms: used only when significant (3 sigma), cited with number and
error, and nothing changes without evidence.

The expected score shifts are the documented weights (engines/rules/astrometry.py: gm +-3, wd +-3, cv +-2), the
expected thresholds the loci's documented lines, written out here as numbers.
"""

from __future__ import annotations

import pytest

from spec_vetting.engines.rules.astrometry import evidence_terms
from spec_vetting.engines.rules.decision import decide
from spec_vetting.engines.rules.diagnostics import RestSpectrum
from spec_vetting.synthetic.synthetic import make_spectrum


def _rs(kind: str, seed: int = 3):
    sp = make_spectrum(kind, seed=seed, snr=40)
    return RestSpectrum.from_spectrum(sp, sp.meta.redshift)


def test_without_evidence_the_decision_is_unchanged():
    for kind, task in (("m_giant", "gm"), ("m_dwarf", "gm"), ("wd_da", "wd"), ("cv", "cv")):
        rs = _rs(kind)
        plain, empty = decide(rs, task), decide(rs, task, evidence={})
        # a match without a significant parallax: M_G null, nothing added
        no_mg = decide(rs, task, evidence={"gaia_source_id": 5, "gaia_abs_g": None, "gaia_bp_rp": 1.0})
        for d in (empty, no_mg):
            assert (d.verdict, d.score, d.p_yes, d.justification) == (
                plain.verdict, plain.score, plain.p_yes, plain.justification)


def test_a_dwarf_luminosity_pulls_gm_down_by_its_weight_and_is_cited():
    rs = _rs("m_dwarf")
    plain = decide(rs, "gm")
    d = decide(rs, "gm", evidence={"gaia_abs_g": 9.0, "gaia_abs_g_error": 0.05, "gaia_bp_rp": 2.8})
    assert d.score == pytest.approx(plain.score - 3.0)
    assert d.verdict == "NO" and "Gaia M_G = 9.00 ± 0.05 mag" in d.justification
    # a giant's luminosity pulls up by 3
    g = decide(rs, "gm", evidence={"gaia_abs_g": 0.5, "gaia_abs_g_error": 0.1})
    assert g.score == pytest.approx(plain.score + 3.0) and "Gaia M_G = 0.50 ± 0.10 mag" in g.justification


def test_a_term_below_three_sigma_does_not_count():
    # M_G 6.5 +- 0.3 is 1.7 sigma beyond the dwarf threshold 6.0; 7.0 +- 0.3 is 3.3 sigma
    assert evidence_terms("gm", {"gaia_abs_g": 6.5, "gaia_abs_g_error": 0.3}) == []
    (t,) = evidence_terms("gm", {"gaia_abs_g": 7.0, "gaia_abs_g_error": 0.3})
    assert t.contribution == -3.0 and t.term.threshold == 6.0 and t.significance == pytest.approx(1.0 / 0.3)


def test_white_dwarf_and_cv_loci():
    # BP-RP 0.2: white-dwarf line at 11.3 + 3.4 * 0.2 = 11.98, main sequence at 2.07 + 3.17 * 0.2 = 2.704
    (on,) = evidence_terms("wd", {"gaia_abs_g": 12.0, "gaia_abs_g_error": 0.05, "gaia_bp_rp": 0.2})
    assert on.contribution == 3.0 and "white-dwarf sequence" in on.sentence()
    (off,) = evidence_terms("wd", {"gaia_abs_g": 4.0, "gaia_abs_g_error": 0.05, "gaia_bp_rp": 0.2})
    assert off.contribution == -3.0 and off.term.threshold == pytest.approx(11.98 - 3.0)
    (between,) = evidence_terms("cv", {"gaia_abs_g": 8.0, "gaia_abs_g_error": 0.05, "gaia_bp_rp": 0.2})
    assert between.contribution == 2.0
    (bright,) = evidence_terms("cv", {"gaia_abs_g": 0.0, "gaia_abs_g_error": 0.05, "gaia_bp_rp": 0.2})
    assert bright.contribution == -2.0 and bright.term.threshold == pytest.approx(2.704 - 2.0)
    assert evidence_terms("wd", {"gaia_abs_g": 12.0, "gaia_abs_g_error": 0.05}) == []  # no colour: no locus
    assert evidence_terms("carbon", {"gaia_abs_g": 12.0, "gaia_abs_g_error": 0.05, "gaia_bp_rp": 0.2}) == []


def test_the_engine_reads_the_evidence_from_the_inspection_context():
    import asyncio

    from spec_vetting.engines.rules.engine import RulesEngine
    from spec_vetting.inspect.loop import run_inspection
    from spec_vetting.inspect.tasks import get_task
    from spec_vetting.types import InspectionContext, Sampling

    sp = make_spectrum("m_dwarf", seed=3, snr=40)
    ctx = InspectionContext("c1", "gm", spectrum=sp, redshift=sp.meta.redshift,
                            evidence={"gaia_abs_g": 9.0, "gaia_abs_g_error": 0.05, "gaia_bp_rp": 2.8})
    result = asyncio.run(run_inspection(ctx, get_task("gm"), RulesEngine(), sampling=Sampling()))
    assert result.verdict == "NO" and "Gaia M_G = 9.00 ± 0.05 mag" in result.justification


def test_a_doubtful_astrometric_solution_decides_nothing():
    """RUWE > 1.4 (Gaia DR3's limit; binaries, CVs among them): no M_G, with the reason; no rules term; no
    evidence_disagrees. The same star at RUWE 1.2 gets all three (M_G = 15 + 5 log10(10 / 100) = 10 by hand)."""
    import numpy as np

    from spec_vetting.evidence.crossmatch import gaia_derived
    from spec_vetting.evidence.loci import disagreement

    star = {"gaia_source_id": 9, "gaia_phot_g_mean_mag": 15.0, "gaia_parallax": 10.0, "gaia_parallax_error": 0.1,
            "gaia_bp_rp": 2.7}
    good = gaia_derived({**star, "gaia_ruwe": 1.2})
    bad = gaia_derived({**star, "gaia_ruwe": 2.31})
    assert good["gaia_abs_g"] == pytest.approx(10.0) and good["gaia_reason"] is None
    assert bad["gaia_abs_g"] is None and bad["gaia_abs_g_error"] is None
    assert bad["gaia_reason"] == "no M_G: astrometric solution unreliable (RUWE 2.31 > 1.4)"

    rs = _rs("m_dwarf")
    assert evidence_terms("gm", {**star, **good, "gaia_ruwe": 1.2})  # a dwarf's luminosity counts
    plain = decide(rs, "gm")
    doubtful = decide(rs, "gm", evidence={**star, **bad, "gaia_ruwe": 2.31})
    assert (doubtful.score, doubtful.verdict, doubtful.justification) == (plain.score, plain.verdict,
                                                                          plain.justification)
    # an M_G carried from before (an older cache, a list) with RUWE 2.31 still decides nothing
    assert evidence_terms("gm", {**star, **good, "gaia_ruwe": 2.31}) == []
    # gm YES for a dwarf: disagrees at RUWE 1.2, not at 2.31 nor ... a missing RUWE keeps the old rule
    flags = disagreement(["gm"] * 3, ["YES"] * 3, [10.0] * 3, [100.0] * 3, [2.7] * 3, [1.2, 2.31, np.nan])
    assert flags.tolist() == [True, False, True]
