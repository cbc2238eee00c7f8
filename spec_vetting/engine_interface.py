"""The one async interface every engine implements: given the conversation so far, the next assistant text.

An inspection opens a :class:`EngineSession` (``async with engine.session(ctx) as s``) and calls
``s.complete(...)`` once per assistant turn. The session is where an HTTP engine pins every turn of one inspection
to one endpoint and holds that endpoint's in-flight slot; in-process engines need nothing there.

An engine class also says what it is, so the layers above never branch on its name: which settings it takes
(:meth:`Engine.options_from_settings`), where its ``p_yes`` comes from, whether starting it is costly, and how many
requests it can have in flight.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from .types import EngineIdentity, EngineReply, EngineSettings, InspectionContext, Message, Sampling


class EngineSession(abc.ABC):
    """One inspection's connection to an engine."""

    @abc.abstractmethod
    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        """The next assistant text for ``messages`` (which end with a user message)."""

    async def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` (special tokens as written) under the model's tokenizer; None when not known.

        The loop uses it to set each turn's max_tokens to the token, as training did (what is left of the context).
        """
        return None

    async def __aenter__(self) -> EngineSession:
        return self

    async def __aexit__(self, *exc) -> None:
        return None


class SlotGate(abc.ABC):
    """In-flight slots per endpoint shared by every engine of a run, wherever they run (the pipeline gives one
    backed by a Dask semaphore per endpoint, so the cap holds over a whole cluster as workers come and go).

    An engine with per-endpoint caps takes a slot here as well as its own before an inspection starts on an
    endpoint, and gives it back when the inspection ends."""

    @abc.abstractmethod
    async def acquire(self, endpoint: str, timeout_s: float) -> bool:
        """Take one of ``endpoint``'s slots, waiting at most ``timeout_s`` (0: do not wait); True when taken."""

    @abc.abstractmethod
    async def release(self, endpoint: str) -> None:
        """Give back one slot of ``endpoint`` taken with :meth:`acquire`."""


class Engine(abc.ABC):
    """Turns a conversation into the next assistant turn."""

    name: ClassVar[str] = "engine"
    #: recorded as ``p_yes_source`` beside a p_yes this engine's replies carry
    p_yes_source: ClassVar[str] = "engine"
    #: starting loads weights: the driver reads :meth:`identity` without starting, shards start their own
    costly_start: ClassVar[bool] = False
    #: the engine runs a trained model, so the prompts it is given must be the training prompts;
    #: False for engines that read no prompt text the way a model does (rules, scripted)
    drives_model: ClassVar[bool] = True
    #: the engine's servers keep a prefix cache: a shard sends one of a candidate's inspections first and its others
    #: once that one's first reply is back, so they find the shared system text and picture cached
    #: (pipeline/warm_prefix.py); False: every inspection starts at once
    warm_prefix_first: bool = False

    @classmethod
    def options_from_settings(cls, settings: EngineSettings) -> dict[str, Any]:
        """Keyword options for the constructor from a job's or a command line's settings.

        The default takes only ``settings.options``; engines that use endpoints, a model or timeouts override it.
        """
        return dict(settings.options)

    @classmethod
    def ignored_settings(cls, settings: EngineSettings) -> list[str]:
        """The settings given that this engine does not use (a command line refuses them, a job warns)."""
        return [f for f in ("endpoints", "model") if getattr(settings, f)]

    @classmethod
    def in_flight_slots(cls, options: dict[str, Any]) -> int | None:
        """Requests an engine built with ``options`` can have in flight over all its servers; None: no such cap."""
        return None

    def in_flight_capacity(self) -> int | None:
        """Inspections this engine can have in flight at once over all its servers; None: no such cap."""
        return None

    def share_slots(self, gate: SlotGate | None) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Take in-flight slots from ``gate`` too (None: only the engine's own caps). Engines without per-endpoint
        caps ignore it."""

    # start/close are optional hooks (an engine with nothing to open keeps these no-ops), so not abstract
    async def start(self) -> None:  # noqa: B027
        """Open connections, check health, load weights. Called once before the first session."""

    async def close(self) -> None:  # noqa: B027
        """Release what :meth:`start` opened."""

    @abc.abstractmethod
    def identity(self) -> EngineIdentity:
        """Engine and model identity (valid after :meth:`start`)."""

    @abc.abstractmethod
    def session(self, ctx: InspectionContext) -> EngineSession:
        """A session for one inspection; use it as an async context manager."""
