"""The one async interface every engine implements: given the conversation so far, the next assistant text.

An inspection opens a :class:`EngineSession` (``async with engine.session(ctx) as s``) and calls
``s.complete(...)`` once per assistant turn. The session is where an HTTP engine pins every turn of one inspection
to one endpoint and holds that endpoint's in-flight slot; in-process engines need nothing there.
"""

from __future__ import annotations

import abc

from .types import EngineIdentity, EngineReply, InspectionContext, Message, Sampling


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
