"""A scripted engine for tests and demos: replies come from a list or a function, no model involved.

``ScriptedEngine(["<think>..</think>\\n<tool_call>..</tool_call>", "<answer>\\boxed{YES}</answer>"])`` answers
turn ``i`` of every inspection with ``replies[i]``. A callable ``reply(messages, ctx, turn)`` may return a text, an
:class:`EngineReply` or raise (for example :class:`EndpointUnavailableError`) to inject faults. List items that are
exceptions are raised. Every call is recorded in ``calls`` so tests can check the conversation sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine_interface import Engine, EngineSession
from ..errors import EngineError
from ..types import EngineIdentity, EngineReply, InspectionContext, Message, Sampling, Usage

ENGINE_VERSION = "scripted-1"

Reply = str | EngineReply | BaseException
ReplyFn = Callable[[list[Message], InspectionContext, int], Any]


@dataclass
class ScriptedCall:
    candidate_id: str
    turn: int
    messages: list[Message]
    sampling: Sampling


class _ScriptedSession(EngineSession):
    def __init__(self, engine: ScriptedEngine, ctx: InspectionContext):
        self.engine = engine
        self.ctx = ctx

    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        self.engine.calls.append(ScriptedCall(self.ctx.candidate_id, turn, list(messages), sampling))
        if self.engine.delay_s:
            await asyncio.sleep(self.engine.delay_s)
        replies = self.engine.replies
        if callable(replies):
            reply = replies(messages, self.ctx, turn)
        elif turn < len(replies):
            reply = replies[turn]
        else:
            raise EngineError(f"scripted engine has no reply for turn {turn} (script holds {len(replies)})",
                              kind="script_exhausted")
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, EngineReply):
            return reply
        text = str(reply)
        return EngineReply(text=text, usage=Usage(prompt_tokens=None, completion_tokens=max(1, len(text) // 4)),
                           endpoint="scripted")


class ScriptedEngine(Engine):
    """Replies from a script; identity ``scripted`` so outputs never pass for a model's."""

    name = "scripted"
    drives_model = False

    def __init__(self, replies: Sequence[Reply] | ReplyFn, *, model: str | None = "scripted",
                 delay_s: float = 0.0, p_yes_source: str = "scripted"):
        self.replies = replies if callable(replies) else list(replies)
        self.p_yes_source = p_yes_source  # a script standing in for a model's logprobs may say "logprobs"
        self.model = model
        self.delay_s = delay_s
        self.calls: list[ScriptedCall] = []

    def identity(self) -> EngineIdentity:
        return EngineIdentity(engine=self.name, engine_version=ENGINE_VERSION, model=self.model)

    def session(self, ctx: InspectionContext) -> EngineSession:
        return _ScriptedSession(self, ctx)
