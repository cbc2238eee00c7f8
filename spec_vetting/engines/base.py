"""The one async interface every engine implements: given the conversation so far, the next assistant text.

An inspection opens a :class:`EngineSession` (``async with engine.session(ctx) as s``) and calls
``s.complete(...)`` once per assistant turn. The session is where an HTTP engine pins every turn of one inspection
to one endpoint and holds that endpoint's in-flight slot; in-process engines need nothing there.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..inspect.types import Message, Usage

if TYPE_CHECKING:  # pragma: no cover
    from ..spectrum import Spectrum


@dataclass
class Sampling:
    """Explicit sampling sent with every request. Greedy by default, as the published validation."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 2048  # per assistant turn
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0


@dataclass
class InspectionContext:
    """What an engine may know about the inspection besides the conversation.

    Model engines use only ``candidate_id`` (routing, request ids). The rules engine also reads the spectrum's
    arrays and the survey redshift, never its class labels.
    """

    candidate_id: str
    task: str  # task key, e.g. "cv"
    run_id: str = "adhoc"
    spectrum: Spectrum | None = None  # observed frame, as read
    redshift: float | None = None  # the redshift the zoom tool uses
    extra: dict[str, Any] = field(default_factory=dict)


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


class EngineSession(abc.ABC):
    """One inspection's connection to an engine."""

    @abc.abstractmethod
    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        """The next assistant text for ``messages`` (which end with a user message)."""

    async def __aenter__(self) -> EngineSession:
        return self

    async def __aexit__(self, *exc) -> None:
        return None


class Engine(abc.ABC):
    """Turns a conversation into the next assistant turn."""

    name: str = "engine"

    async def start(self) -> None:
        """Open connections, check health, load weights. Called once before the first session."""

    async def close(self) -> None:
        """Release what :meth:`start` opened."""

    @abc.abstractmethod
    def identity(self) -> EngineIdentity:
        """Engine and model identity (valid after :meth:`start`)."""

    @abc.abstractmethod
    def session(self, ctx: InspectionContext) -> EngineSession:
        """A session for one inspection; use it as an async context manager."""
