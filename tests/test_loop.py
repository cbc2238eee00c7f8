"""The inspection loop driven by a scripted engine: every stop path, budgets, retries, confidence."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from spec_vetting.engines.scripted import ScriptedEngine
from spec_vetting.errors import ConfigError, EndpointUnavailableError, EngineError
from spec_vetting.inspect.loop import decide, run_inspection, run_inspection_with_confidence
from spec_vetting.inspect.tasks import get_task
from spec_vetting.spectrum import Spectrum, SpectrumMeta
from spec_vetting.types import EngineReply, ImagePart, InspectionContext, Sampling, Usage

ZOOM_HA = ('<think>Check Hα.</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
           '{"label": "Hα", "wavelength_range": [6500, 6600]}}\n</tool_call>')
YES = "<think>Broad emission.</think>\n<answer>\\boxed{YES} broad Balmer emission</answer>"
NO = "<think>Nothing.</think>\n<answer>\\boxed{NO} absorption only</answer>"


def fake_renderer(wavelength, flux, wavelength_range=None, title="Spectrum"):
    return f"PNG {wavelength_range}".encode()


def spectrum(z=None):
    wl = np.linspace(3700.0, 9100.0, 400)
    meta = SpectrumMeta(survey="lamost", variant="lamost-lrs-image", redshift=z)
    return Spectrum(wl, np.ones_like(wl), np.ones_like(wl), np.zeros(wl.shape, bool), "", meta)


def ctx(cid="c1", z=None):
    return InspectionContext(candidate_id=cid, task="cv", spectrum=spectrum(z), redshift=z)


def run(engine, **kw):
    kw.setdefault("renderer", fake_renderer)
    return asyncio.run(run_inspection(kw.pop("ctx", ctx()), get_task("cv"), engine, **kw))


def test_zoom_then_answer():
    eng = ScriptedEngine([ZOOM_HA, YES])
    r = run(eng)
    assert (r.verdict, r.status, r.fallback) == ("YES", "well_formed", None)
    assert r.justification == "broad Balmer emission"
    assert len(r.turns) == 2 and r.n_tool_calls == 1
    t0 = r.turns[0]
    assert t0.tool_response_text == ("Generated spectral visualization focused on wavelength range (6500, 6600) Å "
                                     "for Hα.")
    assert t0.image_png == b"PNG (6500.0, 6600.0)" and t0.zoom_window == (6500.0, 6600.0)
    assert r.initial_image_png == b"PNG None"
    assert r.engine == "scripted" and r.model == "scripted" and r.prompt_version == get_task("cv").version
    assert r.attempts == 1 and r.elapsed_s > 0
    # the second request replays turn 1 raw and the tool answer as a user message with the zoom image
    second = eng.calls[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "user"]
    assert second[2].text == ZOOM_HA
    assert second[3].parts[1] == ImagePart(b"PNG (6500.0, 6600.0)")
    assert second[1].parts[0] == ImagePart(b"PNG None")


def test_redshift_used_for_rest_frame():
    eng = ScriptedEngine([ZOOM_HA, YES])
    r = run(eng, ctx=ctx(z=0.5))
    # rest-frame data span 2466.7-6066.7 Å: 6500-6600 lies above it -> the trained error text, no image
    assert r.turns[0].tool_response_text.startswith("Error: The specified wavelength range [6500, 6600]")
    assert r.turns[0].image_png is None and r.redshift_used == 0.5
    assert eng.calls[1].messages[3].images == []


def test_tool_error_goes_back_as_text_and_loop_continues():
    bad = ('<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [7000, 6000]}}'
           '</tool_call>')
    unknown = '<tool_call>{"name": "plot", "arguments": {}}</tool_call>'
    eng = ScriptedEngine([bad, unknown, NO])
    r = run(eng)
    assert r.verdict == "NO" and len(r.turns) == 3
    assert r.turns[0].tool_response_text.startswith("Error: The specified wavelength range [7000, 6000] is invalid")
    # tool_agent_loop.py:239-243: the KeyError of the tool lookup, as text
    assert r.turns[1].tool_response_text == "Error when executing tool: 'plot'"


def test_unparsable_call_ends_the_rollout():
    # tool_parser.py:96-101 drops a block whose JSON does not parse; tool_agent_loop.py:123-125 ends on no call
    r = run(ScriptedEngine(["<think>x</think><tool_call>{oops</tool_call>", NO]))
    assert r.verdict == "UNDECIDED" and len(r.turns) == 1 and r.turns[0].tool_call is None
    assert "neither an answer nor a tool call" in r.reason


def test_turn_budget_gives_undecided():
    eng = ScriptedEngine(lambda messages, c, turn: ZOOM_HA)
    r = run(eng)
    assert r.verdict == "UNDECIDED" and "8 assistant turns" in r.reason
    assert len(r.turns) == 8 and r.turns[-1].tool_response_text is None
    r3 = run(ScriptedEngine(lambda m, c, t: ZOOM_HA), max_turns=3)
    assert len(r3.turns) == 3


def test_token_budget():
    # the response budget counts every token after the first prompt: generated and tool tokens (50 per tool turn)
    def reply(m, c, t):
        return EngineReply(text=ZOOM_HA, usage=Usage(100 + t * 650, 600, 0))

    eng = ScriptedEngine(reply)
    r = run(eng, token_budget=1000)
    assert r.verdict == "UNDECIDED" and "response budget" in r.reason and len(r.turns) == 2
    assert r.turns[0].tool_response_text is not None and r.turns[1].tool_response_text is None
    # per-turn max_tokens: training's min(32768, 34816 - context - 1), the context estimated from usage
    assert eng.calls[0].sampling.max_tokens == 32768
    assert eng.calls[1].sampling.max_tokens == 32768  # context ~1400 tokens: the response length is the bound
    from spec_vetting.protocol import turn_max_tokens

    assert turn_max_tokens(33000) == 34816 - 33000 - 1 and turn_max_tokens(None) == 32768
    # a tool answer that brings the conversation over the budget: training would not have asked again
    r = run(ScriptedEngine(reply), token_budget=640)
    assert len(r.turns) == 1 and r.turns[0].tool_response_text is None and "response budget" in r.reason


def test_time_budget_on_a_slow_engine():
    eng = ScriptedEngine(lambda m, c, t: ZOOM_HA, delay_s=0.2)
    r = run(eng, time_budget_s=0.3)
    # the engine, not the model, spent the budget (turn 1 never came): not inspected to the end, so ERROR (re-run
    # by --incremental), not an UNDECIDED answer; the turn it did answer is kept
    assert r.verdict == "ERROR" and r.error_kind == "engine_timeout" and "time budget" in r.error_message
    assert len(r.turns) == 1
    assert r.elapsed_s < 1.0
    # an engine that never answers at all
    r = run(ScriptedEngine(lambda m, c, t: ZOOM_HA, delay_s=5.0), time_budget_s=0.2)
    assert r.verdict == "ERROR" and r.error_kind == "engine_timeout" and not r.turns


class QueuedEngine(ScriptedEngine):
    """A scripted engine whose sessions wait ``queue_s`` for a slot first, as a busy endpoint's queue does."""

    def __init__(self, replies, queue_s):
        super().__init__(replies)
        self.queue_s = queue_s

    def session(self, c):
        inner, queue_s = super().session(c), self.queue_s

        class Queued(type(inner)):
            async def __aenter__(self):
                await asyncio.sleep(queue_s)
                return self

        inner.__class__ = Queued
        return inner


def test_time_budget_does_not_count_the_wait_for_an_endpoint_slot():
    r = run(QueuedEngine([ZOOM_HA, YES], queue_s=0.4), time_budget_s=0.3)
    assert r.verdict == "YES", r.reason
    # once the engine holds the inspection, the budget runs
    slow = QueuedEngine(lambda m, c, t: ZOOM_HA, queue_s=0.4)
    slow.delay_s = 0.2
    r = run(slow, time_budget_s=0.3)
    # spent waiting for the engine's second or third turn (ERROR engine_timeout), or, should the deadline fall
    # between a reply and the next request, before the model answered (UNDECIDED)
    assert (r.verdict, r.error_kind) in {("ERROR", "engine_timeout"), ("UNDECIDED", None)}, r
    assert "time budget" in (r.error_message or r.reason) and 1 <= len(r.turns) <= 2


def test_no_answer_no_call_is_undecided_with_reason():
    r = run(ScriptedEngine(["<think>hmm</think> I am not sure."]))
    assert r.verdict == "UNDECIDED" and "neither an answer nor a tool call" in r.reason
    cut = EngineReply(text="<think>long", finish_reason="length")
    r = run(ScriptedEngine([cut]))
    assert "max_tokens" in r.reason
    r = run(ScriptedEngine(["<think>hmm</think>\n<answer>\\boxed{MAYBE}</answer>"]))
    assert r.verdict == "UNDECIDED" and r.reason.startswith("the model's <answer> holds no YES/NO verdict")


def test_engine_abstain_reason_is_recorded():
    why = "Hα window masked: no good pixel in 6540-6590 Å"
    r = run(ScriptedEngine([EngineReply(text="<think>The Hα window is unusable.</think>", abstain_reason=why)]))
    assert r.verdict == "UNDECIDED" and r.reason == why


def test_recovered_verdict_kept_and_flagged():
    # inside an answer block: the verdict, flagged
    r = run(ScriptedEngine(["<think>a</think><answer>Yes, it is a CV</answer>"]))
    assert (r.verdict, r.status, r.fallback) == ("YES", "recovered", "answer_word")
    # a word dug out of a text with no answer block is not a verdict (kept as recovered_verdict)
    r = run(ScriptedEngine(["Yes, it is a CV"]))
    assert (r.verdict, r.status, r.fallback, r.recovered_verdict) == ("UNDECIDED", "none", "word_anywhere", "YES")
    assert "recovered_verdict" in r.reason
    garbage = "blah " * 200_000 + " no " + "blah " * 10
    r = run(ScriptedEngine([EngineReply(text=garbage, p_yes=0.1)]))
    assert r.verdict == "UNDECIDED" and r.recovered_verdict == "NO" and r.p_yes is None


def test_answer_beside_tool_call_runs_the_call_and_continues():
    # tool_agent_loop.py:122-134: only tool calls are looked at; the reward then reads the whole trajectory
    eng = ScriptedEngine([ZOOM_HA + "\n" + YES, EngineReply(text=NO, p_yes=0.2)])
    r = run(eng)
    assert len(r.turns) == 2 and r.n_tool_calls == 1 and r.turns[0].tool_response_text is not None
    assert (r.verdict, r.status, r.fallback) == ("NO", "recovered", "last_answer_block")
    assert r.p_yes == 0.2  # read at the verdict taken (turn 2's box)


def test_only_the_first_call_of_a_turn_runs():
    two = ZOOM_HA + ZOOM_HA.replace("[6500, 6600]", "[4000, 4100]")
    r = run(ScriptedEngine([two, YES]))
    assert r.turns[0].zoom_window == (6500.0, 6600.0) and len(r.turns) == 2


def test_logprob_p_yes_recorded():
    # the script stands in for a model server's answer-token logprobs
    r = run(ScriptedEngine([EngineReply(text=YES, p_yes=0.93)], p_yes_source="logprobs"))
    assert r.p_yes == 0.93 and r.p_yes_source == "logprobs"


def test_p_yes_source_is_the_engines_own_word():
    # a scripted p_yes is not a model's: the engine names its source, the loop never guesses from the name
    r = run(ScriptedEngine([EngineReply(text=YES, p_yes=0.93)]))
    assert r.p_yes == 0.93 and r.p_yes_source == "scripted"


def test_endpoint_death_reruns_from_start():
    attempts = {"n": 0}

    def reply(messages, c, turn):
        if turn == 1 and attempts["n"] == 0:
            attempts["n"] += 1
            raise EndpointUnavailableError("endpoint http://a/v1 died", endpoint="http://a/v1")
        return [ZOOM_HA, YES][turn]

    eng = ScriptedEngine(reply)
    r = run(eng)
    assert r.verdict == "YES" and r.attempts == 2 and len(r.turns) == 2
    assert [c.turn for c in eng.calls] == [0, 1, 0, 1]


def test_endpoint_death_gives_up_after_retries():
    eng = ScriptedEngine(lambda m, c, t: (_ for _ in ()).throw(EndpointUnavailableError("down")))
    r = run(eng, max_endpoint_retries=2)
    assert r.verdict == "ERROR" and r.error_kind == "engine_unavailable" and r.attempts == 3
    assert "3 attempts" in r.error_message


@pytest.mark.parametrize(
    "exc, kind",
    [(EngineError("HTTP 400 from http://a/v1: bad request", kind="http_400"), "http_400"),
     (RuntimeError("boom"), "internal_error")],
)
def test_engine_errors_become_error_rows(exc, kind):
    r = run(ScriptedEngine([exc]))
    assert r.verdict == "ERROR" and r.error_kind == kind and r.error_message


def test_missing_spectrum_and_render_failure():
    c = InspectionContext(candidate_id="x", task="cv")
    r = run(ScriptedEngine([YES]), ctx=c)
    assert r.verdict == "ERROR" and r.error_kind == "no_spectrum" and "x" in r.error_message

    def broken(*a, **k):
        raise RuntimeError("no font")

    r = run(ScriptedEngine([YES]), renderer=broken)
    assert r.verdict == "ERROR" and r.error_kind == "render_error" and "no font" in r.error_message


def test_script_exhausted_is_an_error_row():
    r = run(ScriptedEngine([ZOOM_HA]))
    assert r.verdict == "ERROR" and r.error_kind == "script_exhausted"


def test_sampling_passed_to_engine():
    eng = ScriptedEngine([YES])
    run(eng, sampling=Sampling(temperature=0.0, max_tokens=512))
    assert eng.calls[0].sampling.max_tokens == 512


def test_self_consistency_majority():
    answers = iter([YES, NO, YES, YES, "I don't know"])

    def reply(m, c, t):
        return next(answers)

    eng = ScriptedEngine(reply)
    r = asyncio.run(run_inspection_with_confidence(ctx(), get_task("cv"), eng, k=5,
                                                   sampling=Sampling(temperature=0.7, seed=1),
                                                   renderer=fake_renderer))
    assert r.verdict == "YES" and r.p_yes == pytest.approx(3 / 4) and r.p_yes_source == "self_consistency"
    assert {c.sampling.seed for c in eng.calls} == {1, 2, 3, 4, 5}
    assert all(c.sampling.temperature == 0.7 for c in eng.calls)


def test_self_consistency_tie_and_greedy_refused():
    answers = iter([YES, NO])
    eng = ScriptedEngine(lambda m, c, t: next(answers))
    r = asyncio.run(run_inspection_with_confidence(ctx(), get_task("cv"), eng, k=2,
                                                   sampling=Sampling(temperature=1.0), renderer=fake_renderer))
    assert r.verdict == "UNDECIDED" and r.p_yes == 0.5 and "tie" in r.reason
    with pytest.raises(ConfigError, match="temperature"):
        asyncio.run(run_inspection_with_confidence(ctx(), get_task("cv"), eng, k=3, renderer=fake_renderer))


def test_k1_is_plain_inspection():
    r = asyncio.run(run_inspection_with_confidence(ctx(), get_task("cv"), ScriptedEngine([NO]), k=1,
                                                   renderer=fake_renderer))
    assert r.verdict == "NO" and r.p_yes is None


def test_candidate_prompt_from_file_is_sent():
    eng = ScriptedEngine([YES])
    task = get_task("cv").with_prompt("<image>\nAnalyze the provided spectrum to determine if it is a **Cataclysmic**.")
    r = asyncio.run(run_inspection(ctx(), task, eng, renderer=fake_renderer))
    assert eng.calls[0].messages[1].text == "\nAnalyze the provided spectrum to determine if it is a **Cataclysmic**."
    assert r.prompt_version == task.version and r.prompt_version.startswith("inline-")


@pytest.mark.parametrize(
    "text, turn, action",
    [(YES, 0, "end"), (ZOOM_HA, 0, "tool"), (ZOOM_HA, 7, "end"), ("nothing", 0, "end"), ("yes", 0, "end"),
     (ZOOM_HA + YES, 0, "tool")],
)
def test_decide_table(text, turn, action):
    assert decide(text, turn=turn).action == action


def test_recovered_verdict_comes_only_from_what_the_model_wrote():
    """The reward's fallbacks read the whole trajectory, tool answers included; a recovered verdict kept for review
    must not be a word of the tool's own text ("**No** data points ...")."""
    from spec_vetting.inspect.loop import read_trajectory
    from spec_vetting.types import Turn, Usage

    tool_no = ("Error processing spectral visualization: No data points in specified wavelength range "
               "(9000, 9001)")
    silent = [Turn(index=0, assistant_text="<think>zoom</think><tool_call>{}</tool_call>", usage=Usage(),
                   tool_response_text=tool_no),
              Turn(index=1, assistant_text="<think>hmm, the window is empty</think>", usage=Usage())]
    reading, _, _ = read_trajectory(silent)
    assert reading.verdict is None and reading.recovered_verdict is None
    # the model's own word is still recovered (and never taken as the verdict)
    spoken = [silent[0], Turn(index=1, assistant_text="<think>so the answer is yes</think>", usage=Usage())]
    reading, _, _ = read_trajectory(spoken)
    assert reading.verdict is None and reading.recovered_verdict == "YES"


def test_each_turn_gets_what_is_left_of_the_context_to_the_token():
    """Training: max_new_tokens = min(32768, 34816 - len(prompt_ids) - 1). With an engine that counts tokens, the
    next turn's context is the last prompt + completion + the tool turn's own ids (its pictures widened)."""
    import asyncio
    import re

    from spec_vetting.engines.scripted import ScriptedEngine
    from spec_vetting.inspect.loop import run_inspection
    from spec_vetting.inspect.tasks import get_task
    from spec_vetting.render.tokens import image_tokens
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.types import EngineReply, InspectionContext, Usage

    zoom = ('<think>z</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
            '{"wavelength_range": [6500, 6600]}}\n</tool_call>')
    counted = []

    class Counting(ScriptedEngine):
        def session(self, ctx):
            s = super().session(ctx)

            async def count_tokens(text):  # one token per character, a special token <|...|> is one
                counted.append(text)
                return len(re.sub(r"<\|[a-z_]+\|>", "#", text))

            s.count_tokens = count_tokens
            return s

    # turn 0 used 33000 tokens of context: the second turn has 34816 - (33000 + 100 + tool) - 1 left
    engine = Counting([EngineReply(zoom, Usage(33000, 100), endpoint="x"),
                       EngineReply("<answer>\\boxed{NO}</answer>", Usage(33500, 5), endpoint="x")])
    spectrum = make_spectrum("cv", seed=3)
    ctx = InspectionContext(candidate_id="c1", task="cv", spectrum=spectrum, redshift=spectrum.meta.redshift)
    result = asyncio.run(run_inspection(ctx, get_task("cv"), engine))
    (text,) = counted
    assert text.startswith("<|im_start|>user\n<tool_response>\n<|vision_start|><|image_pad|><|vision_end|>")
    assert text.endswith("\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    png = result.turns[0].image_png
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    # the one <|image_pad|> widened to the picture's tokens
    tool = len(re.sub(r"<\|[a-z_]+\|>", "#", text)) - 1 + image_tokens(w, h)
    assert engine.calls[0].sampling.max_tokens == 32768
    assert engine.calls[1].sampling.max_tokens == 34816 - (33000 + 100 + tool) - 1
