"""The inspection layer: tasks and prompts, the conversation, parsing, the zoom tool and the loop.

``parse_tool_call`` and ``parse_answer`` are re-exported here; the rest is imported from its module (the loop pulls
in the engine interface, which imports this package's ``types``, so it is not imported eagerly).
"""

from .parsing import parse_answer, parse_tool_call

__all__ = ["parse_answer", "parse_tool_call"]
