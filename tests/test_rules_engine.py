"""The rules engine on synthetic spectra and edge cases, through the real loop (with a stub renderer for speed)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import numpy as np
import pytest

from spec_vetting.engines import create_engine
from spec_vetting.engines.rules.decision import decide, p_yes_from_score
from spec_vetting.engines.rules.diagnostics import RestSpectrum
from spec_vetting.engines.rules.engine import MAX_ZOOMS, RULES_VERSION, RulesEngine, make_plan
from spec_vetting.engines.rules.tasks import RULES_TASKS, rules_task
from spec_vetting.inspect.loop import run_inspection
from spec_vetting.inspect.parsing import parse_answer, parse_tool_call
from spec_vetting.inspect.tasks import get_task
from spec_vetting.protocol import TOOL_NAME
from spec_vetting.spectrum import SpectrumMeta
from spec_vetting.synthetic.synthetic import TASK_CONFUSERS, TASK_POSITIVES, make_spectrum
from spec_vetting.types import InspectionContext, Sampling

TASKS = ("cv", "carbon", "ss", "gm", "wd")
# seeds away from both the calibration (0-1999) and the benchmark test range (100000-101999)
SEEDS = (5001, 5002)


def stub_renderer(wavelength, flux, wavelength_range=None, title="Spectrum"):
    return b"\x89PNG stub"


def inspect(spectrum, task, redshift="meta"):
    z = spectrum.meta.redshift if redshift == "meta" else redshift
    ctx = InspectionContext(candidate_id="c1", task=task, spectrum=spectrum, redshift=z)
    return asyncio.run(run_inspection(ctx, get_task(task), RulesEngine(), renderer=stub_renderer))


def reply_texts(spectrum, task, redshift=0.0):
    """The engine's replies, turn by turn, without the loop."""

    async def go():
        ctx = InspectionContext(candidate_id="c1", task=task, spectrum=spectrum, redshift=redshift)
        session = RulesEngine().session(ctx)
        out = []
        for turn in range(8):
            reply = await session.complete([], turn=turn, sampling=Sampling())
            out.append(reply)
            if "<tool_call>" not in reply.text:
                return out
        raise AssertionError("the rules engine never answered")

    return asyncio.run(go())


def verdict_rate(kind, task, verdict, seeds=range(5001, 5007), snr=40.0):
    hits = 0
    for seed in seeds:
        sp = make_spectrum(kind, seed=seed, snr=snr)
        hits += decide(RestSpectrum.from_spectrum(sp, sp.meta.redshift), task).verdict == verdict
    return hits / len(seeds)


#: positives the engine must catch at S/N 40; the hard ones are caught less often, as the benchmark measures:
#: a disc in outburst shows absorption, not emission, and the width of its shallow broad lines is uncertain by
#: 5-15 Å at S/N 40 (measured over noise draws), so it is often not significant (UNDECIDED, issue 26); the warmest
#: synthetic M giants have TiO as weak as a K7 star's
MIN_YES_RATE = {"cv_outburst": 0.3, "m_giant": 0.5}


@pytest.mark.parametrize("task", TASKS)
def test_synthetic_positives_are_mostly_yes(task):
    for kind in TASK_POSITIVES[task]:
        assert verdict_rate(kind, task, "YES", seeds=range(5001, 5013)) >= MIN_YES_RATE.get(kind, 0.8), kind


@pytest.mark.parametrize("task", TASKS)
def test_synthetic_confusers_are_mostly_no(task):
    """At most one YES in 12, and mostly a firm NO; the rest UNDECIDED where no term is significant (a hot white
    dwarf's shallow Balmer lines are as uncertain in width as a disc in outburst's, for cv)."""
    for kind in TASK_CONFUSERS[task]:
        assert verdict_rate(kind, task, "YES", seeds=range(5001, 5013)) <= 1 / 12, kind
        assert verdict_rate(kind, task, "NO", seeds=range(5001, 5013)) >= 0.65, kind


@pytest.mark.parametrize("task,kind", [("cv", "cv"), ("carbon", "carbon"), ("ss", "s_star"), ("gm", "m_giant"),
                                       ("wd", "wd_da"), ("wd", "wd_db")])
def test_synthetic_positive_through_the_loop(task, kind):
    r = inspect(make_spectrum(kind, seed=5004, snr=40.0), task)
    assert r.verdict == "YES" and r.status == "well_formed", (r.justification, r.reason)
    assert r.p_yes >= 0.5 and r.n_tool_calls >= 1


@pytest.mark.parametrize("task,kind", [("cv", "a_star"), ("carbon", "m_giant"), ("ss", "m_giant"), ("gm", "m_dwarf"),
                                       ("wd", "a_star")])
def test_synthetic_confuser_through_the_loop(task, kind):
    r = inspect(make_spectrum(kind, seed=5003, snr=40.0), task)
    assert r.verdict == "NO" and r.status == "well_formed", (r.justification, r.reason)
    assert r.p_yes < 0.5


def test_galaxy_redshift_is_evidence_against_every_stellar_task():
    g = make_spectrum("galaxy", seed=SEEDS[0], snr=30.0)
    assert g.meta.redshift > 0.01
    for task in TASKS:
        r = inspect(g, task)
        assert r.verdict == "NO" and "redshift" in r.justification
    # a CV placed at z = 0.05 is not a Galactic CV any more
    cv = make_spectrum("cv", seed=SEEDS[0], snr=40.0, redshift=0.05)
    assert inspect(cv, "cv").verdict == "NO"


def test_engine_never_reads_pipeline_class():
    """A G star labelled WD by its survey is still a G star; reading the label at all fails the test."""

    class Trap(SpectrumMeta):
        def __getattribute__(self, name):
            if name in ("pipeline_class", "pipeline_subclass"):
                raise AssertionError(f"the rules engine read meta.{name}")
            return super().__getattribute__(name)

    g = make_spectrum("g_star", seed=SEEDS[0], snr=40.0)
    fields = {f.name: getattr(g.meta, f.name) for f in dataclasses.fields(SpectrumMeta)}
    fields.update(pipeline_class="STAR", pipeline_subclass="WD")
    object.__setattr__(g, "meta", Trap(**fields))
    replies = reply_texts(g, "wd", redshift=g.meta.redshift)
    assert parse_answer(replies[-1].text).verdict == "NO"


def test_turns_follow_the_trained_format():
    sp = make_spectrum("wd_da", seed=SEEDS[0], snr=40.0)
    replies = reply_texts(sp, "wd", redshift=sp.meta.redshift)
    *zooms, final = replies
    assert 1 <= len(zooms) <= 4
    for r in zooms:
        assert r.text.startswith("<think>\n") and "</think>\n<tool_call>\n" in r.text
        call = parse_tool_call(r.text)
        assert call.error is None and call.name == TOOL_NAME
        assert list(call.arguments) == ["label", "wavelength_range"]  # label first, as protocol section 2.4
        lo, hi = call.arguments["wavelength_range"]
        assert isinstance(lo, int) and isinstance(hi, int) and lo < hi
        assert r.p_yes is None and r.abstain_reason is None
    answer = parse_answer(final.text)
    assert answer.status == "well_formed" and answer.verdict == "YES"
    assert answer.justification  # the justification after the boxed verdict
    assert final.p_yes is not None and final.p_yes >= 0.5 and final.abstain_reason is None
    assert "Rules score" in final.text and "calibrated probability" in final.text


def test_identity_is_rules_never_a_model():
    engine = create_engine("rules")
    ident = engine.identity()
    assert (ident.engine, ident.engine_version, ident.model) == ("rules", RULES_VERSION, None)
    assert "calibration_seeds" in ident.model_info


def _undecided(spectrum, task, redshift=0.0):
    replies = reply_texts(spectrum, task, redshift=redshift)
    final = replies[-1]
    # the text carries no verdict the protocol's fallbacks could recover
    answer = parse_answer(final.text)
    assert answer.verdict is None and answer.status == "none", final.text
    assert final.abstain_reason and final.p_yes is None
    r = inspect(spectrum, task, redshift=redshift)
    assert r.verdict == "UNDECIDED"
    assert r.reason == final.abstain_reason  # the result says why, in the engine's words
    return final


def test_masked_windows_give_undecided_with_reason():
    sp = make_spectrum("cv", seed=SEEDS[0], snr=40.0)
    rest = sp.wavelength / (1 + sp.meta.redshift)
    bad = ((rest > 4700) & (rest < 5000)) | ((rest > 6400) & (rest < 6700))
    sp.mask = sp.mask | bad
    final = _undecided(sp, "cv", redshift=sp.meta.redshift)
    assert "masked" in final.abstain_reason and "EW(Hα)" in final.abstain_reason


def test_too_low_snr_gives_undecided():
    sp = make_spectrum("m_giant", seed=SEEDS[0], snr=0.3)
    final = _undecided(sp, "gm", redshift=sp.meta.redshift)
    assert "S/N too low" in final.abstain_reason


def test_windows_outside_coverage_give_undecided():
    sp = make_spectrum("wd_da", seed=SEEDS[0], snr=40.0)
    keep = sp.wavelength > 5200  # the blue half, where every Balmer diagnostic sits, is missing
    sp = dataclasses.replace(sp, wavelength=sp.wavelength[keep], flux=sp.flux[keep], ivar=sp.ivar[keep],
                             mask=sp.mask[keep])
    final = _undecided(sp, "wd", redshift=0.0)
    assert "outside the rest-frame coverage" in final.abstain_reason


def test_unknown_task_gives_undecided():
    sp = make_spectrum("a_star", seed=SEEDS[0], snr=40.0)
    d = decide(RestSpectrum.from_spectrum(sp, 0.0), "obstar")
    assert d.verdict is None and "not for task 'obstar'" in d.reason


def test_abstain_text_never_contains_yes_or_no_words():
    sp = make_spectrum("cv", seed=SEEDS[0], snr=40.0)
    sp.mask[:] = True
    final = reply_texts(sp, "cv")[-1]
    low = final.text.lower()
    assert " no " not in f" {low} " and "yes" not in low


def test_unknown_redshift_is_taken_as_rest_frame_and_said_so():
    sp = make_spectrum("carbon", seed=SEEDS[0], snr=40.0)
    replies = reply_texts(sp, "carbon", redshift=None)
    assert "redshift is unknown" in replies[0].text
    assert parse_answer(replies[-1].text).verdict == "YES"


def test_p_yes_is_monotonic_in_score_and_calibrated_per_task():
    for task in TASKS:
        a, b = RULES_TASKS[task].calibration
        assert a > 0
        ps = [p_yes_from_score(task, s) for s in (-5.0, -1.0, 0.0, 1.0, 5.0)]
        assert ps == sorted(ps) and 0.0 <= ps[0] < 0.5 < ps[-1] <= 1.0


def test_plan_zooms_overlap_the_data():
    sp = make_spectrum("qso", seed=SEEDS[0], snr=30.0)
    rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
    lo, hi = rs.coverage
    for task in TASKS:
        plan = make_plan(rs, task)
        assert plan.zooms and all(z.hi > lo and z.lo < hi for z in plan.zooms)


def test_engine_cost_without_rendering_is_small():
    """The target is <= 10 ms per inspection; allow slack here for a loaded CI machine."""
    sp = make_spectrum("m_giant", seed=SEEDS[0], snr=30.0)
    reply_texts(sp, "gm")  # warm up
    costs = []
    for task in TASKS:
        t0 = time.perf_counter()
        reply_texts(sp, task)
        costs.append(time.perf_counter() - t0)
    assert float(np.median(costs)) < 0.05, costs


POSITIVE_KIND = {"cv": "cv", "carbon": "carbon", "ss": "s_star", "gm": "m_giant", "wd": "wd_da"}


@pytest.mark.parametrize("task", TASKS)
def test_every_measurement_is_zoomed_on_or_read_from_the_full_view_and_cited(task):
    """Each window the engine measures is shown: inside one zoom (line and pseudo-continuum windows together),
    or, for a number over the whole spectrum (continuum slope, S/N), in the full view; and its number is cited."""
    sp = make_spectrum(POSITIVE_KIND[task], seed=SEEDS[1], snr=40.0)
    rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
    plan = make_plan(rs, task)
    assert len(plan.zooms) == len(rules_task(task).zooms) <= MAX_ZOOMS  # full coverage: every zoom is made
    text = "\n".join(r.text for r in reply_texts(sp, task, redshift=sp.meta.redshift))
    for key, m in plan.decision.measurements.items():
        in_one_zoom = any(all(z.lo <= lo and hi <= z.hi for lo, hi in m.windows) for z in plan.zooms)
        each_in_a_zoom = all(any(z.lo <= lo and hi <= z.hi for z in plan.zooms) for lo, hi in m.windows)
        span = max(hi for _, hi in m.windows) - min(lo for lo, _ in m.windows)
        assert in_one_zoom or each_in_a_zoom or span >= 500, (key, m.windows)
        assert m.fmt() in text, (key, m.fmt())
    for z in plan.zooms:
        assert f'"wavelength_range": [{int(z.lo)}, {int(z.hi)}]' in text


def test_whole_spectrum_numbers_are_cited_in_the_first_turn():
    sp = make_spectrum("cv", seed=SEEDS[0], snr=40.0)
    first = reply_texts(sp, "cv", redshift=sp.meta.redshift)[0].text
    assert "In the full view: continuum slope α = " in first


@pytest.mark.parametrize("task", TASKS)
def test_unknown_redshift_with_an_extragalactic_line_is_undecided(task):
    """A QSO read at rest once passed for a white dwarf (Mg II as a broad Balmer line) or a carbon star (the Lyα
    forest as C2 bands); without a redshift the engine says why it cannot decide instead of guessing."""
    qso = make_spectrum("qso", seed=5002, snr=30.0)
    final = _undecided(qso, task, redshift=None)
    assert "redshift is unknown" in final.abstain_reason and "emission line at" in final.abstain_reason
    replies = reply_texts(qso, task, redshift=None)
    first_zoom = parse_tool_call(replies[0].text).arguments
    assert first_zoom["label"] == "Zoom on the unexplained emission line"  # looked at first, then cited
    assert "centre of the unexplained emission line = " in replies[1].text
    # with the survey's redshift the same spectrum is decided: NO, it is extragalactic
    assert inspect(qso, task).verdict == "NO"


def test_unknown_redshift_of_a_star_is_still_decided():
    for kind, task in (("wd_da", "wd"), ("m_giant", "gm"), ("cv", "cv"), ("a_star", "wd")):
        sp = make_spectrum(kind, seed=SEEDS[0], snr=30.0)
        assert inspect(sp, task, redshift=None).verdict in ("YES", "NO"), kind


def test_class_names_take_the_right_article():
    sp = make_spectrum("m_giant", seed=SEEDS[0], snr=40.0)
    assert "whether this is an M-type Giant" in reply_texts(sp, "gm")[0].text
    assert "whether this is a White Dwarf" in reply_texts(sp, "wd")[0].text


def test_unexplained_line_outside_every_task_window_is_still_cited():
    """Only the line's zoom overlaps the data: the final turn reports it and says no diagnostic window is covered."""
    sp = make_spectrum("g_star", seed=SEEDS[0], snr=40.0)
    keep = (sp.wavelength > 5262) & (sp.wavelength < 5540)  # between carbon's zooms
    flux = sp.flux[keep] * (1.0 + 2.0 * np.exp(-0.5 * ((sp.wavelength[keep] - 5360.0) / 3.0) ** 2))
    sp = dataclasses.replace(sp, wavelength=sp.wavelength[keep], flux=flux, ivar=sp.ivar[keep], mask=sp.mask[keep])
    replies = reply_texts(sp, "carbon", redshift=None)
    assert len(replies) == 2 and "unexplained emission line" in replies[0].text
    final = replies[-1]
    assert "centre of the unexplained emission line = 53" in final.text and "falls inside the data" in final.text
    assert final.abstain_reason and "redshift is unknown" in final.abstain_reason
