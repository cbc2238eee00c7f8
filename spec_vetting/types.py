"""The shared vocabulary: conversation messages, parsed calls and answers, turns, results, and what passes
between the loop and an engine (sampling, context, reply, identity).

Wire-neutral on purpose: engines translate :class:`Message` into their own format (OpenAI JSON, token ids, ...).
Every layer may import this module; it imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pragma: no cover
    from .spectrum import Spectrum

Verdict = Literal["YES", "NO", "UNDECIDED", "ERROR"]
AnswerStatus = Literal["well_formed", "recovered", "none"]


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    png: bytes  # PNG bytes exactly as rendered; identical bytes across turns keep the server's prefix cache warm


Part = TextPart | ImagePart


@dataclass
class Message:
    role: Literal["system", "user", "assistant"]
    parts: list[Part]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def images(self) -> list[bytes]:
        return [p.png for p in self.parts if isinstance(p, ImagePart)]


@dataclass
class ToolCall:
    """A ``<tool_call>`` block the hermes parser of training accepts: a JSON object with a string ``name`` and
    ``arguments`` (any JSON value, kept as parsed). ``error`` notes a name that is not the zoom tool."""

    name: str | None
    arguments: Any
    error: str | None = None
    raw: str = ""


@dataclass
class Answer:
    verdict: Literal["YES", "NO"] | None
    status: AnswerStatus
    fallback: str | None = None  # which fallback of protocol section 5 produced a recovered verdict
    justification: str = ""
    #: YES/NO the fallbacks found outside every <answer> block: not a verdict, kept for review
    recovered_verdict: Literal["YES", "NO"] | None = None


@dataclass
class Usage:
    """Token usage of one request. None means the server did not report it (recorded as missing, not zero)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


@dataclass
class Turn:
    """One assistant turn and what the tool answered to it."""

    index: int  # 0-based assistant turn number
    assistant_text: str
    tool_call: ToolCall | None = None
    tool_response_text: str | None = None
    image_png: bytes | None = None  # the picture the tool answered with, if any
    zoom_window: tuple[float, float] | None = None  # rest-frame Å, as plotted
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    endpoint: str | None = None
    finish_reason: str | None = None


@dataclass
class InspectionResult:
    """A whole inspection: the trajectory and its verdict. Exactly one per (candidate, task)."""

    candidate_id: str
    task: str
    verdict: Verdict
    status: AnswerStatus = "none"
    fallback: str | None = None
    justification: str = ""
    #: YES/NO dug out of a text with no <answer> block; the verdict is then UNDECIDED
    recovered_verdict: str | None = None
    p_yes: float | None = None
    p_yes_source: str | None = None  # "logprobs" | "self_consistency" | "rules_score" | None
    reason: str | None = None  # why UNDECIDED (budget, no answer, ...) in words
    error_kind: str | None = None
    error_message: str | None = None
    engine: str = ""
    engine_version: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    renderer_version: str | None = None
    redshift_used: float | None = None
    initial_image_png: bytes | None = None
    #: where the first picture came from: "rendered" (drawn by renderer_version) or the context's given source
    initial_image_source: str | None = None
    turns: list[Turn] = field(default_factory=list)
    attempts: int = 1  # inspections rerun from the start after an endpoint died count here
    started_at: float | None = None  # unix seconds
    elapsed_s: float = 0.0

    @property
    def n_tool_calls(self) -> int:
        return sum(1 for t in self.turns if t.tool_call is not None)

    def usage_totals(self) -> Usage:
        def total(attr):
            vals = [getattr(t.usage, attr) for t in self.turns]
            if not vals or all(v is None for v in vals):
                return None
            return sum(v for v in vals if v is not None)

        return Usage(total("prompt_tokens"), total("completion_tokens"), total("cached_tokens"))


@dataclass
class Sampling:
    """Explicit sampling sent with every request. Greedy by default, as the published validation."""

    temperature: float = 0.0
    top_p: float = 1.0
    #: per assistant turn; None (default) = as in training: what is left of the response budget, within the
    #: context length (protocol.turn_max_tokens). A number caps each turn below that (a deviation).
    max_tokens: int | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    # What training's rollouts applied beyond temperature and top_p (verl's agent loop sends repetition_penalty 1.0
    # and SGLang's defaults left the rest neutral). Sent on every request so that a checkpoint's
    # generation_config.json (Qwen2.5-VL ships repetition_penalty 1.05, top_k 1) cannot change decoding.
    top_k: int = -1  # off
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


@dataclass
class InspectionContext:
    """What an engine may know about the inspection besides the conversation.

    Model engines use only ``candidate_id`` (routing, request ids). The rules engine also reads the spectrum's
    arrays, the survey redshift and the evidence, never the survey's class labels.
    """

    candidate_id: str
    task: str  # task key, e.g. "cv"
    run_id: str = "adhoc"
    spectrum: Spectrum | None = None  # observed frame, as read
    redshift: float | None = None  # the redshift the zoom tool uses
    #: the first picture as given (a SpecVI-Bench row's own full view); None: the loop renders the full view
    initial_image_png: bytes | None = None
    #: where a given first picture comes from, recorded as the result's initial_image_source (e.g. "specvi")
    initial_image_source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: the candidate's evidence beyond the spectrum (``gaia_abs_g``, ``gaia_abs_g_error``, ``gaia_bp_rp`` ...;
    #: empty without evidence). The rules engine weighs it; model engines leave it out of the trained prompt
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineReply:
    text: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    endpoint: str | None = None
    finish_reason: str | None = None
    #: probability of YES read from the answer token's log-probabilities, when the engine can give it
    p_yes: float | None = None
    #: set by an engine that deliberately gives no verdict (e.g. the rules engine on masked windows): the reason
    abstain_reason: str | None = None


@dataclass
class EngineIdentity:
    """Recorded with every result: which engine and which model produced it."""

    engine: str  # "openai" | "local" | "rules" | ...
    engine_version: str
    model: str | None  # served model id / local folder name; None for the rules engine
    model_info: dict[str, Any] = field(default_factory=dict)  # checksum, server version, endpoints ...


@dataclass
class EngineSettings:
    """What a job file or a command line says about the engine, before the engine turns it into its options.

    Each engine reads the fields it uses (:meth:`~spec_vetting.engine_interface.Engine.options_from_settings`) and
    names the ones it ignores, so the pipeline and the command line never branch on an engine's name.
    """

    endpoints: list[str] = field(default_factory=list)  # one base URL per replica, or a gateway alone
    model: str | None = None  # served model id, or a local model folder
    api_key_env: str | None = None
    timeout_s: float | None = None  # per request
    max_inflight_per_endpoint: int | None = None
    device: str | None = None  # where an in-process model runs (cpu, cuda, cuda:1)
    options: dict[str, Any] = field(default_factory=dict)  # the engine's own keyword options, passed through
