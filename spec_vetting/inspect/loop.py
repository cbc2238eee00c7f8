"""The inspection loop: full view -> ask the engine -> parse -> zoom -> ask again ... -> verdict.

The decision after each assistant turn is a pure function (:func:`decide`) so every path is tested with a scripted
engine; :func:`run_inspection` only drives it (engine session, zoom tool in a worker thread, budgets, retries).

It never raises for a per-candidate problem: the result is ``YES``/``NO`` (with the answer's format status),
``UNDECIDED`` (no parsable verdict within budget; ``reason`` says which) or ``ERROR`` (``error_kind`` and
``error_message``). Cancellation is passed through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Literal

from ..errors import EndpointUnavailableError, SpecVettingError
from ..engine_interface import Engine
from ..types import EngineReply, InspectionContext, Sampling
from .conversation import assistant_message, build_initial_messages, cut_tool_response, tool_response_message
from .parsing import has_answer_block, parse_answer, parse_tool_call
from ..protocol import MAX_ASSISTANT_TURNS, TOOL_NAME
from .tasks import Task
from ..types import Answer, InspectionResult, ToolCall, Turn
from .zoom import Renderer, ZoomResult, ZoomTool

log = logging.getLogger(__name__)

# --- the pure part -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What to do after one assistant turn."""

    action: Literal["answer", "tool", "stop"]
    answer: Answer | None = None
    call: ToolCall | None = None
    reason: str | None = None  # why the loop stops without a verdict


def decide(text: str, *, turn: int, max_turns: int = MAX_ASSISTANT_TURNS, completion_tokens_used: int = 0,
           token_budget: int | None = None, finish_reason: str | None = None) -> Decision:
    """The next step after assistant turn ``turn`` (0-based) wrote ``text``.

    An answer block with a verdict ends the inspection even when a tool call sits beside it (the published reward
    reads the answer; a zoom after it would change nothing). A tool call is run unless a budget is spent. A text
    with neither ends the inspection as the RL rollout did; a verdict the fallbacks recover from it is kept,
    flagged as recovered.
    """
    answer = parse_answer(text)
    if answer.verdict is not None and has_answer_block(text):
        return Decision("answer", answer=answer)
    call = parse_tool_call(text)
    if call is not None:
        if turn + 1 >= max_turns:
            return Decision("stop", call=call,
                            reason=f"turn budget spent: {max_turns} assistant turns without an answer")
        if token_budget is not None and completion_tokens_used >= token_budget:
            return Decision("stop", call=call,
                            reason=f"token budget spent: {completion_tokens_used} completion tokens >= "
                                   f"{token_budget} without an answer")
        return Decision("tool", call=call)
    if answer.verdict is not None:
        return Decision("answer", answer=answer)
    if has_answer_block(text):
        reason = "the model's <answer> holds no YES/NO verdict"
    else:
        reason = "the model gave neither an answer nor a tool call"
    if finish_reason == "length":
        reason += " (its reply was cut at max_tokens; raise --max-tokens)"
    return Decision("stop", answer=answer, reason=reason)


def tool_result_for(call: ToolCall, zoom: ZoomTool) -> ZoomResult:
    """The tool's answer to a parsed call.

    A call naming the tool reaches it even with a bad window: the zoom tool answers with the trained tool's own
    texts (and a call without a range gets the full view, as in training). A call that never reached the tool
    (bad JSON, unknown tool name) gets its parse error back as text.
    """
    if call.name == TOOL_NAME and isinstance(call.arguments, dict):
        return zoom.call(call.arguments)
    return ZoomResult(f"Error: {call.error or 'unusable tool call'}")


# --- the driver ----------------------------------------------------------------------------------------------------


class _Stop(Exception):
    """Internal: the attempt ended without a verdict (budget)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _renderer_version(renderer: Renderer | None) -> str | None:
    if renderer is not None:  # an injected renderer (tests, experiments) is not the versioned Spec-o3 one
        return getattr(renderer, "version", None)
    from ..render import RENDERER_VERSION

    return RENDERER_VERSION


class _TimeBudget:
    """The wall-time budget of one inspection, started when an engine first takes it (its endpoint slot is held).

    Waiting in the queue for a free endpoint slot is not the inspection's time: a batch deliberately queues more
    inspections than there are slots, and those must not run out of budget before their first turn.
    """

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.deadline: float | None = None

    def start(self) -> None:
        if self.seconds is not None and self.deadline is None:
            self.deadline = time.monotonic() + self.seconds


def _completion_tokens(turns: list[Turn]) -> int:
    # a server that leaves usage out is counted by a rough 4 characters per token, so the budget still holds
    return sum(t.usage.completion_tokens if t.usage.completion_tokens is not None else len(t.assistant_text) // 4
               for t in turns)


async def _attempt(ctx: InspectionContext, task: Task, engine: Engine, zoom: ZoomTool, full_png: bytes,
                   sampling: Sampling, *, max_turns: int, token_budget: int | None, budget: _TimeBudget,
                   result: InspectionResult) -> None:
    """One inspection from its start; fills ``result`` (turns, verdict). Raises engine errors to the caller."""
    messages = build_initial_messages(task, full_png)
    result.turns = []
    async with engine.session(ctx) as session:
        budget.start()  # a rerun keeps the deadline of the first attempt
        deadline = budget.deadline
        for turn in range(max_turns):
            if deadline is not None and time.monotonic() >= deadline:
                raise _Stop("time budget spent before an answer")
            t0 = time.monotonic()
            request = session.complete(list(messages), turn=turn, sampling=sampling)
            try:
                reply: EngineReply = (await asyncio.wait_for(request, deadline - t0) if deadline is not None
                                      else await request)
            except TimeoutError:
                raise _Stop("time budget spent while waiting for the engine") from None
            rec = Turn(index=turn, assistant_text=reply.text or "", usage=reply.usage,
                       latency_s=reply.latency_s or (time.monotonic() - t0), endpoint=reply.endpoint,
                       finish_reason=reply.finish_reason)
            result.turns.append(rec)
            decision = decide(rec.assistant_text, turn=turn, max_turns=max_turns,
                              completion_tokens_used=_completion_tokens(result.turns), token_budget=token_budget,
                              finish_reason=reply.finish_reason)
            if decision.action == "answer":
                ans = decision.answer
                result.verdict = ans.verdict
                result.status, result.fallback, result.justification = ans.status, ans.fallback, ans.justification
                if reply.p_yes is not None:
                    # each engine says where its p_yes comes from (answer-token logprobs, a calibrated score ...)
                    result.p_yes, result.p_yes_source = reply.p_yes, getattr(engine, "p_yes_source", "engine")
                return
            rec.tool_call = decision.call
            if decision.action == "stop":
                # an engine that abstains on purpose (the rules engine on unusable data) says why
                raise _Stop(reply.abstain_reason or decision.reason or "no verdict")
            zr = await asyncio.get_running_loop().run_in_executor(None, tool_result_for, decision.call, zoom)
            rec.tool_response_text = cut_tool_response(zr.text)
            rec.image_png = zr.image_png
            rec.zoom_window = zr.window
            messages.append(assistant_message(rec.assistant_text))
            messages.append(tool_response_message(zr.text, zr.image_png))
    raise _Stop(f"turn budget spent: {max_turns} assistant turns without an answer")  # pragma: no cover


def _error(result: InspectionResult, kind: str, message: str) -> InspectionResult:
    result.verdict, result.error_kind, result.error_message = "ERROR", kind, message
    result.status, result.p_yes, result.p_yes_source = "none", None, None
    return result


async def run_inspection(ctx: InspectionContext, task: Task, engine: Engine, *, sampling: Sampling | None = None,
                         max_turns: int = MAX_ASSISTANT_TURNS, token_budget: int | None = None,
                         time_budget_s: float | None = None, title: str = "Spectrum",
                         max_endpoint_retries: int = 2, renderer: Renderer | None = None) -> InspectionResult:
    """Inspect ``ctx.spectrum`` for ``task`` with ``engine`` (already started). Never raises per candidate.

    ``token_budget`` caps the completion tokens summed over turns (training capped the response at 32768);
    ``time_budget_s`` caps the wall time of the whole inspection, reruns included, counted from the moment the
    engine takes it (time queued for a free endpoint slot does not count). When the engine reports that
    the endpoint died (:class:`EndpointUnavailableError`) the inspection is rerun from its start, up to
    ``max_endpoint_retries`` more times; ``result.attempts`` counts the runs.
    """
    sampling = sampling or Sampling()
    started_at, t0 = time.time(), time.monotonic()
    budget = _TimeBudget(time_budget_s)
    result = InspectionResult(candidate_id=ctx.candidate_id, task=task.key, verdict="UNDECIDED",
                              prompt_version=task.version, renderer_version=_renderer_version(renderer),
                              redshift_used=ctx.redshift, started_at=started_at, attempts=0)
    try:
        ident = engine.identity()
        result.engine, result.engine_version, result.model = ident.engine, ident.engine_version, ident.model
    except Exception as exc:  # identity is bookkeeping: never lose the inspection for it
        result.engine = getattr(engine, "name", type(engine).__name__)
        log.warning("engine identity unavailable for %s: %s", ctx.candidate_id, exc)

    def done(r: InspectionResult) -> InspectionResult:
        r.elapsed_s = time.monotonic() - t0
        return r

    if ctx.spectrum is None:
        return done(_error(result, "no_spectrum",
                           f"candidate {ctx.candidate_id}: no spectrum was given to inspect (read it first)"))
    try:
        zoom = ZoomTool(ctx.spectrum.wavelength, ctx.spectrum.flux, ctx.redshift, title, renderer=renderer)
        full_png = await zoom.afull_view()
    except SpecVettingError as exc:
        return done(_error(result, exc.kind, f"candidate {ctx.candidate_id}: full view failed: {exc}"))
    except Exception as exc:
        return done(_error(result, "render_error",
                           f"candidate {ctx.candidate_id}: full view failed: {type(exc).__name__}: {exc}"))
    result.initial_image_png = full_png

    while True:
        result.attempts += 1
        fresh = dataclasses.replace(result, turns=[])
        try:
            await _attempt(ctx, task, engine, zoom, full_png, sampling, max_turns=max_turns,
                           token_budget=token_budget, budget=budget, result=fresh)
            return done(fresh)
        except _Stop as stop:
            fresh.verdict, fresh.reason = "UNDECIDED", stop.reason
            fresh.status = "none"
            return done(fresh)
        except EndpointUnavailableError as exc:
            if result.attempts > max_endpoint_retries:
                return done(_error(fresh, exc.kind, f"{exc} (gave up after {result.attempts} attempts)"))
            log.info("rerunning %s from its start after endpoint failure: %s", ctx.candidate_id, exc)
            continue
        except SpecVettingError as exc:  # EngineError included: its kind says what failed
            return done(_error(fresh, exc.kind, str(exc)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in an engine must not take the batch down: record it on the row
            log.exception("inspection of %s failed", ctx.candidate_id)
            return done(_error(fresh, "internal_error", f"{type(exc).__name__}: {exc}"))


# --- confidence by self-consistency --------------------------------------------------------------------------------


async def run_inspection_with_confidence(ctx: InspectionContext, task: Task, engine: Engine, *, k: int = 1,
                                         sampling: Sampling | None = None, **kwargs) -> InspectionResult:
    """One inspection (k = 1) or ``k`` sampled ones voting (a confidence that needs no logprobs).

    With k > 1 the verdict is the majority of the YES/NO samples and ``p_yes`` the fraction of them that said YES
    (``p_yes_source = "self_consistency"``); a tie is UNDECIDED. The returned trajectory is the first sample that
    agrees with the majority, so the trace explains the verdict. Samples that ended UNDECIDED or ERROR do not vote;
    when none voted, the first sample is returned as is. Sampling must be stochastic (temperature > 0).
    """
    sampling = sampling or Sampling()
    if k <= 1:
        return await run_inspection(ctx, task, engine, sampling=sampling, **kwargs)
    if sampling.temperature <= 0:
        from ..errors import ConfigError

        raise ConfigError(f"self-consistency with k={k} needs sampling: set a temperature above 0 (e.g. 0.7); "
                          "greedy decoding gives k identical answers")
    samples = [dataclasses.replace(sampling, seed=None if sampling.seed is None else sampling.seed + i)
               for i in range(k)]
    results = await asyncio.gather(*(run_inspection(ctx, task, engine, sampling=s, **kwargs) for s in samples))
    votes = [r for r in results if r.verdict in ("YES", "NO")]
    if not votes:
        return results[0]
    n_yes = sum(r.verdict == "YES" for r in votes)
    p_yes = n_yes / len(votes)
    majority = "YES" if p_yes > 0.5 else "NO" if p_yes < 0.5 else None
    chosen = next((r for r in votes if r.verdict == majority), votes[0])
    out = dataclasses.replace(chosen, p_yes=p_yes, p_yes_source="self_consistency",
                              elapsed_s=max(r.elapsed_s for r in results),
                              attempts=sum(r.attempts for r in results))
    if majority is None:
        out.verdict, out.status = "UNDECIDED", "none"
        out.reason = f"self-consistency tie: {n_yes} YES and {len(votes) - n_yes} NO of {k} samples"
    return out
