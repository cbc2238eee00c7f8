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

from ..answers import locate_verdict, read_answer, trajectory_text
from ..chat_stream import trained_stream_text
from ..engine_interface import Engine
from ..errors import EndpointUnavailableError, SpecVettingError
from ..protocol import MAX_ASSISTANT_TURNS, RESPONSE_TOKENS, turn_max_tokens
from ..render.tokens import image_tokens
from ..types import EngineReply, ImagePart, InspectionContext, InspectionResult, Sampling, ToolCall, Turn
from .conversation import assistant_message, build_initial_messages, tool_response_message
from .parsing import has_answer_block, parse_tool_call
from .tasks import Task
from .zoom import Renderer, ZoomResult, ZoomTool, answer_tool_call

log = logging.getLogger(__name__)

# --- the pure part -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What to do after one assistant turn: run its tool call, or end the inspection (and read the trajectory)."""

    action: Literal["tool", "end"]
    call: ToolCall | None = None
    reason: str | None = None  # why it ended, when a budget ended it


def decide(text: str, *, turn: int, max_turns: int = MAX_ASSISTANT_TURNS, response_tokens_used: int = 0,
           response_budget: int | None = RESPONSE_TOKENS, cut: bool = False) -> Decision:
    """The next step after assistant turn ``turn`` (0-based) wrote ``text``, in the order of training's agent loop
    (``tool_agent_loop.py`` ``run``): response budget spent -> end; ``max_turns`` assistant turns -> end; no valid
    tool call -> end; else run the first call. An answer beside a call does not end it: the call runs.

    ``cut``: the turn stopped at max_tokens. In training a turn could only be cut where the context ran out (each
    turn's max_new_tokens was what was left of it), which puts the response past its 32768-token budget: the
    rollout ended there, and a cut turn (no ``<|im_end|>``) was never followed by a tool turn. A cut turn ends the
    inspection here too, also under a job's own per-turn cap, since no served template can replay it as training
    would have (without its ``<|im_end|>``).
    """
    call = parse_tool_call(text)
    if response_budget is not None and response_tokens_used >= response_budget:
        return Decision("end", call=call, reason=f"response budget spent: {response_tokens_used} tokens >= "
                                                 f"{response_budget}")
    if cut:
        return Decision("end", call=call, reason="the turn was cut at max_tokens (in training a cut turn ended "
                                                 "the rollout)")
    if max_turns and turn + 1 >= max_turns:
        return Decision("end", call=call, reason=f"turn budget spent: {max_turns} assistant turns")
    if call is None:
        return Decision("end")
    return Decision("tool", call=call)


def tool_result_for(call: ToolCall, zoom: ZoomTool) -> ZoomResult:
    """The answer to a parsed call, as training's agent loop gave it (see :func:`zoom.answer_tool_call`)."""
    return answer_tool_call(call, zoom)


def _no_verdict_reason(reading, text: str, end_reason: str | None, finish_reason: str | None) -> str:
    if reading.recovered_verdict is not None:
        why = (f"no <answer> block: the {reading.fallback} fallback found {reading.recovered_verdict}, kept in "
               "recovered_verdict for review, not taken as a verdict")
    elif has_answer_block(text):
        why = f"the model's <answer> holds no YES/NO verdict (it reads as {reading.predicted[:80]!r})"
    else:
        why = "the model gave neither an answer nor a tool call"
    if end_reason:
        why = f"{end_reason}; {why}"
    if finish_reason == "length":
        why += " (its last reply was cut at max_tokens)"
    return why


def _in_model_text(position: int | None, turns: list[Turn], starts: list[int]) -> bool:
    return position is not None and any(0 <= position - s < len(t.assistant_text or "")
                                        for t, s in zip(turns, starts, strict=True))


def read_trajectory(turns: list[Turn], p_yes_by_turn: list[float | None] | None = None):
    """The published reward's reading of the whole trajectory, and p_yes when it is that of the verdict taken.

    p_yes comes from the engine's reply of the turn holding the verdict, and only when that reply's own verdict
    token (:func:`spec_vetting.answers.locate_verdict` on the turn's text) is the one the trajectory reading took.
    A recovered verdict (kept for review, never taken) comes only from what the model wrote: the reward's fallbacks
    search the tool answers too (``**No** data points ...``), so when they land there the model's own turns are
    read alone.
    """
    text, starts = trajectory_text(turns)
    reading = read_answer(text)
    if reading.verdict is None and reading.recovered_verdict is not None and not _in_model_text(
            reading.position, turns, starts):
        own = read_answer("".join(t.assistant_text or "" for t in turns))
        reading = dataclasses.replace(reading, recovered_verdict=own.verdict or own.recovered_verdict)
    p_yes = None
    if reading.verdict is not None and reading.position is not None and p_yes_by_turn:
        for k, t in enumerate(turns):
            local = reading.position - starts[k]
            if 0 <= local < len(t.assistant_text or ""):
                if k < len(p_yes_by_turn) and locate_verdict(t.assistant_text) == local:
                    p_yes = p_yes_by_turn[k]
                break
    return reading, text, p_yes


# --- the driver ----------------------------------------------------------------------------------------------------


class _Stop(Exception):
    """Internal: the attempt ended without a verdict (time budget)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _EngineNeverAnswered(Exception):
    """Internal: the time budget ran out while the engine had not answered: the pair was not inspected."""


#: the ERROR kinds of a pair the engine never answered; like every ERROR, re-run by ``--incremental``
ENGINE_TIMEOUT = "engine_timeout"
ENGINE_UNAVAILABLE = "engine_unavailable"


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


def _image_tokens(png: bytes | None) -> int:
    """Qwen2.5-VL tokens of one picture with its markup: one per 28x28 block after the processor's resize, plus
    ``<|vision_start|>`` and ``<|vision_end|>``."""
    if not png or len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n":
        return 0
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    try:
        return image_tokens(w, h) + 2
    except SpecVettingError:  # a size the processor refuses: the server will say so
        return 0


def _tool_tokens_estimate(t: Turn) -> int:
    if t.tool_response_text is None:
        return 0
    return len(t.tool_response_text) // 3 + 12 + _image_tokens(t.image_png)


def response_tokens_used(turns: list[Turn], first_prompt: int | None) -> int:
    """Tokens after the first prompt (every generated and tool token), as training's response budget counts them.

    Exact from the server's usage (this turn's prompt + completion - the first prompt); a server that leaves
    usage out is counted roughly (4 characters per generated token, tool texts and pictures estimated).
    """
    last = turns[-1]
    if first_prompt is not None and last.usage.prompt_tokens is not None and last.usage.completion_tokens is not None:
        return last.usage.prompt_tokens + last.usage.completion_tokens - first_prompt
    gen = sum(t.usage.completion_tokens if t.usage.completion_tokens is not None else len(t.assistant_text) // 4
              for t in turns)
    return gen + sum(_tool_tokens_estimate(t) for t in turns[:-1])


def _context_estimate(turns: list[Turn], tool_tokens: int | None = None) -> int | None:
    """Length of the next request's conversation: the last one's prompt and completion plus the tool answer
    (``tool_tokens`` when the engine counted that turn, else estimated)."""
    if not turns:
        return None
    last = turns[-1]
    if last.usage.prompt_tokens is None or last.usage.completion_tokens is None:
        return None
    tool = tool_tokens if tool_tokens is not None else _tool_tokens_estimate(last)
    return last.usage.prompt_tokens + last.usage.completion_tokens + tool


async def tool_turn_tokens(session, message) -> int | None:
    """Tokens the tool turn adds to the conversation, as training counted them (its ids, each picture widened to its
    image tokens): the turn's text in training's stream counted by the engine's tokenizer, None when it has none."""
    text = trained_stream_text([message], add_generation_prompt=True)
    n = await session.count_tokens(text)
    if n is None:
        return None
    pictures = [p.png for p in message.parts if isinstance(p, ImagePart)]
    # each <|image_pad|> of the markup stands for one token per 28x28 block of the picture
    return n + sum(max(0, _image_tokens(png) - 2) - 1 for png in pictures)


def _turn_sampling(sampling: Sampling, turns: list[Turn], tool_tokens: int | None = None) -> Sampling:
    limit = turn_max_tokens(_context_estimate(turns, tool_tokens))
    if sampling.max_tokens is not None:  # a cap below training's (a deviation the job asked for)
        limit = min(limit, int(sampling.max_tokens))
    return dataclasses.replace(sampling, max_tokens=limit)


async def _attempt(ctx: InspectionContext, task: Task, engine: Engine, zoom: ZoomTool, full_png: bytes,
                   sampling: Sampling, *, max_turns: int, token_budget: int | None, budget: _TimeBudget,
                   result: InspectionResult) -> None:
    """One inspection from its start; fills ``result`` (turns, verdict). Raises engine errors to the caller."""
    messages = build_initial_messages(task, full_png)
    result.turns = []
    p_yes_by_turn: list[float | None] = []
    end_reason: str | None = None
    last_reply: EngineReply | None = None
    first_prompt: int | None = None
    tool_tokens: int | None = None  # of the last tool turn, when the engine can count them
    async with engine.session(ctx) as session:
        budget.start()  # a rerun keeps the deadline of the first attempt
        deadline = budget.deadline
        for turn in range(max_turns):
            if deadline is not None and time.monotonic() >= deadline:
                if not result.turns:  # the engine never answered this inspection (earlier attempts hung)
                    raise _EngineNeverAnswered(f"time budget of {budget.seconds:g} s spent before the engine "
                                               "answered a first turn")
                raise _Stop("time budget spent before an answer")
            t0 = time.monotonic()
            request = session.complete(list(messages), turn=turn,
                                       sampling=_turn_sampling(sampling, result.turns, tool_tokens))
            try:
                reply: EngineReply = (await asyncio.wait_for(request, deadline - t0) if deadline is not None
                                      else await request)
            except TimeoutError:
                # the server, not the model, used the budget up: not an answer of the model's, so not UNDECIDED
                raise _EngineNeverAnswered(
                    f"time budget of {budget.seconds:g} s spent while waiting for the engine's turn {turn} "
                    f"({len(result.turns)} turn(s) answered); the pair was not inspected to the end") from None
            rec = Turn(index=turn, assistant_text=reply.text or "", usage=reply.usage,
                       latency_s=reply.latency_s or (time.monotonic() - t0), endpoint=reply.endpoint,
                       finish_reason=reply.finish_reason)
            if turn == 0:
                first_prompt = reply.usage.prompt_tokens
            elif (token_budget is not None and first_prompt is not None and reply.usage.prompt_tokens is not None
                  and reply.usage.prompt_tokens - first_prompt >= token_budget):
                # training checks before appending a tool answer that it fits the response budget; the tokens
                # of that answer are known here only now: this turn would not have been asked for
                end_reason = (f"response budget spent: the tool answer brought the conversation to "
                              f"{reply.usage.prompt_tokens - first_prompt} response tokens >= {token_budget}")
                result.turns[-1].tool_response_text = None
                break
            result.turns.append(rec)
            p_yes_by_turn.append(reply.p_yes)
            last_reply = reply
            decision = decide(rec.assistant_text, turn=turn, max_turns=max_turns,
                              response_tokens_used=response_tokens_used(result.turns, first_prompt),
                              response_budget=token_budget, cut=reply.finish_reason == "length")
            rec.tool_call = decision.call
            if decision.action == "end":
                end_reason = decision.reason
                break
            zr = await asyncio.get_running_loop().run_in_executor(None, tool_result_for, decision.call, zoom)
            rec.tool_response_text = zr.text
            rec.image_png = zr.image_png
            rec.zoom_window = zr.window
            messages.append(assistant_message(rec.assistant_text))
            messages.append(tool_response_message(zr.text, zr.image_png))
            tool_tokens = await tool_turn_tokens(session, messages[-1])
    reading, text, p_yes = read_trajectory(result.turns, p_yes_by_turn)
    result.status, result.fallback, result.justification = reading.status, reading.fallback, reading.justification
    if reading.verdict is not None:
        result.verdict = reading.verdict
        if p_yes is not None:
            # each engine says where its p_yes comes from (answer-token logprobs, a calibrated score ...)
            result.p_yes, result.p_yes_source = p_yes, getattr(engine, "p_yes_source", "engine")
        return
    result.recovered_verdict = reading.recovered_verdict
    abstain = last_reply.abstain_reason if last_reply is not None else None
    raise _Stop(abstain or _no_verdict_reason(reading, text, end_reason,
                                             last_reply.finish_reason if last_reply is not None else None))


def _error(result: InspectionResult, kind: str, message: str) -> InspectionResult:
    result.verdict, result.error_kind, result.error_message = "ERROR", kind, message
    result.status, result.p_yes, result.p_yes_source = "none", None, None
    return result


#: reruns of an inspection whose endpoint died, from its start on another endpoint
DEFAULT_ENDPOINT_RETRIES = 2
#: wall time of one inspection, reruns included: bounds a hung endpoint to minutes
DEFAULT_TIME_BUDGET_S = 600.0


class _FirstPictureFailed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


async def _tool_and_first_picture(ctx: InspectionContext, zoom: ZoomTool | None, title: str,
                                  renderer: Renderer | None) -> tuple[ZoomTool, bytes]:
    """The zoom tool (``zoom`` when shared) and the first picture: the one given with the candidate (SpecVI-Bench's
    own full view) as is, else the drawn full view. :class:`_FirstPictureFailed` with the error kind otherwise."""
    try:
        if zoom is None:
            zoom = ZoomTool(ctx.spectrum.wavelength, ctx.spectrum.flux, ctx.redshift, title, renderer=renderer)
        return zoom, ctx.initial_image_png or await zoom.afull_view()
    except SpecVettingError as exc:
        raise _FirstPictureFailed(exc.kind, f"candidate {ctx.candidate_id}: full view failed: {exc}") from exc
    except Exception as exc:
        raise _FirstPictureFailed("render_error", f"candidate {ctx.candidate_id}: full view failed: "
                                                  f"{type(exc).__name__}: {exc}") from exc


async def run_inspection(ctx: InspectionContext, task: Task, engine: Engine, *, sampling: Sampling | None = None,
                         max_turns: int = MAX_ASSISTANT_TURNS, token_budget: int | None = RESPONSE_TOKENS,
                         time_budget_s: float | None = None, title: str = "Spectrum",
                         max_endpoint_retries: int = DEFAULT_ENDPOINT_RETRIES,
                         renderer: Renderer | None = None, zoom: ZoomTool | None = None) -> InspectionResult:
    """Inspect ``ctx.spectrum`` for ``task`` with ``engine`` (already started). Never raises per candidate.

    ``token_budget`` is training's response budget: every token after the first prompt (generated and tool
    tokens) over the whole conversation, 32768 (also when None is given); each turn may use what is left
    (``sampling.max_tokens`` None) or a cap below it;
    ``time_budget_s`` caps the wall time of the whole inspection, reruns included, counted from the moment the
    engine takes it (time queued for a free endpoint slot does not count). When the engine reports that
    the endpoint died (:class:`EndpointUnavailableError`) the inspection is rerun from its start, up to
    ``max_endpoint_retries`` more times; ``result.attempts`` counts the runs. ``zoom`` is a tool already made for
    ``ctx.spectrum`` at ``ctx.redshift`` with this ``title`` and ``renderer``, shared with the candidate's other
    inspections so that each picture is drawn once (None: a tool of its own).
    """
    sampling = sampling or Sampling()
    if token_budget is None:
        token_budget = RESPONSE_TOKENS
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
        zoom, full_png = await _tool_and_first_picture(ctx, zoom, title, renderer)
    except _FirstPictureFailed as exc:
        return done(_error(result, exc.kind, str(exc)))
    result.initial_image_png = full_png
    result.initial_image_source = (ctx.initial_image_source or "given") if ctx.initial_image_png else "rendered"

    while True:
        result.attempts += 1
        fresh = dataclasses.replace(result, turns=[])
        try:
            await _attempt(ctx, task, engine, zoom, full_png, sampling, max_turns=max_turns,
                           token_budget=token_budget, budget=budget, result=fresh)
            return done(fresh)
        except _Stop as stop:
            fresh.verdict, fresh.reason = "UNDECIDED", stop.reason
            # the reason, not a fragment of the reply (a server's raw tail is no justification; it stays in turns)
            fresh.justification = stop.reason
            fresh.status = "none"
            return done(fresh)
        except _EngineNeverAnswered as exc:
            return done(_error(fresh, ENGINE_TIMEOUT, f"candidate {ctx.candidate_id}: {exc}"))
        except EndpointUnavailableError as exc:
            if result.attempts > max_endpoint_retries:
                return done(_error(fresh, ENGINE_UNAVAILABLE, f"{exc} (gave up after {result.attempts} attempts)"))
            log.info("rerunning %s from its start after endpoint failure: %s", ctx.candidate_id, exc)
            continue
        except SpecVettingError as exc:  # EngineError included: its kind says what failed
            kind = ENGINE_UNAVAILABLE if exc.kind == "no_healthy_endpoint" else exc.kind
            return done(_error(fresh, kind, str(exc)))
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
