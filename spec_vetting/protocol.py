"""The exact strings of the Spec-o3 training setup (docs/maintainers/protocol.md sections 2 and 3).

Fidelity is the contract: these are compared character for character in tests. Change nothing here without the
protocol document changing first.
"""

from __future__ import annotations

TOOL_NAME = "spectral_visualization_tool"

#: The one tool line, key order as in training (no ``items``, no ``strict``).
TOOL_LINE = (
    '{"type": "function", "function": {"name": "spectral_visualization_tool", "description": '
    '"A tool for visualizing spectral data with wavelength range zooming capabilities.", "parameters": '
    '{"type": "object", "properties": {"wavelength_range": {"type": "array", "description": '
    '"Wavelength range to focus on [min_wavelength, max_wavelength] in Angstroms"}, "label": {"type": '
    '"string", "description": "Optional label for the spectral feature being analyzed"}}, "required": '
    '["wavelength_range"]}}}'
)

SYSTEM_PREAMBLE = "You are a helpful assistant."

#: The whole system text: the default system sentence followed by the standard Qwen2.5 tools block.
SYSTEM_TEXT = (
    SYSTEM_PREAMBLE
    + "\n\n# Tools\n\nYou may call one or more functions to assist with the user query."
    "\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    + TOOL_LINE
    + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}'
    "\n</tool_call>"
)

#: The Qwen2.5 tools block as training's template appended it to the system message's own text (the agent loop
#: always passes ``tools=``): everything of :data:`SYSTEM_TEXT` after the default sentence.
TOOLS_BLOCK = SYSTEM_TEXT[len(SYSTEM_PREAMBLE):]


def system_text(own: str | None = None) -> str:
    """The system turn's text as training rendered it: the system message's own text, then the tools block.

    ``own`` None is the default sentence (no system message, or SpecVI-Bench's). A text that already ends with the
    tools block (files written by earlier spec-vetting exports) is taken as rendered already: the block appears once.
    """
    own = SYSTEM_PREAMBLE if own is None else own
    return own if own.endswith(TOOLS_BLOCK) else own + TOOLS_BLOCK


#: Qwen2.5-VL image markup as the chat template writes it for one image part.
IMAGE_MARKUP = "<|vision_start|><|image_pad|><|vision_end|>"

TOOL_RESPONSE_OPEN = "<tool_response>\n"
TOOL_RESPONSE_CLOSE = "\n</tool_response>"

#: Other keys that name a built-in task: SpecVI-Bench's ``data_source`` "cc" (protocol section 1) and the short
#: forms users type. The one table: task lists, label files, SpecVI-Bench rows and the rules engine all read it.
TASK_ALIASES = {"cc": "carbon", "cs": "carbon", "mg": "gm", "s": "ss"}

#: how a SpecVI-Bench prompt marks where the full-view image goes (the start of the user text)
IMAGE_PLACEHOLDER = "<image>"

#: Training limits (protocol section 2.7; upstream ``recipe/spec_o3/configs/spec_o3.yaml`` and verl's
#: ``trainer/config/rollout/rollout.yaml`` defaults).
MAX_ASSISTANT_TURNS = 8  # multi_turn.max_assistant_turns
MAX_PARALLEL_CALLS = 1  # multi_turn.max_parallel_calls: only the first call of a turn runs
MAX_TOOL_RESPONSE_CHARS = 1024  # multi_turn.max_tool_response_length
TRUNCATED_MARKER = "...(truncated)..."  # tool_response_truncate_side: middle
PROMPT_TOKENS = 2048  # data.max_prompt_length
RESPONSE_TOKENS = 32768  # data.max_response_length: every generated and tool token after the first prompt
MAX_MODEL_LEN = PROMPT_TOKENS + RESPONSE_TOKENS  # rollout.max_model_len (null -> prompt + response)

#: the agent loop's text for a call that failed before the tool answered (tool_agent_loop.py ``_call_tool``)
TOOL_EXCEPTION_PREFIX = "Error when executing tool: "


def cut_tool_text(text: str) -> str:
    """A tool's answer text as training cut it: over 1024 characters, first 512 + marker + last 512."""
    if text and len(text) > MAX_TOOL_RESPONSE_CHARS:
        half = MAX_TOOL_RESPONSE_CHARS // 2
        return text[:half] + TRUNCATED_MARKER + text[-half:]
    return text


def turn_max_tokens(context_tokens: int | None) -> int:
    """max_new_tokens of one turn as verl's SGLang rollout set it: min(response length, context left - 1).

    ``context_tokens`` is the length of the whole conversation sent (None: not known yet, e.g. the first turn,
    whose prompt is under 2048 tokens, so the response length is the bound).
    """
    if context_tokens is None:
        return RESPONSE_TOKENS
    return max(1, min(RESPONSE_TOKENS, MAX_MODEL_LEN - int(context_tokens) - 1))


def zoom_success_text(window: tuple | None, label) -> str:
    """Text answered with the image; ``window`` is the tuple of values as the model typed them.

    ``label`` is whatever the model passed: any falsy value (missing, "", 0, false, [], null) gives no label, any
    other is printed with ``str()`` (upstream ``spectral_visualization_tool.py`` ``execute``).
    """
    if window is None:
        base = "Generated full spectrum visualization"
    else:
        base = f"Generated spectral visualization focused on wavelength range {tuple(window)} Å"
    return f"{base} for {label}." if label else f"{base}."


def zoom_invalid_range_text(requested, lo: float, hi: float) -> str:
    """Text answered (no image) for a window that is malformed, reversed or outside the data.

    ``requested`` is printed with ``str()``, as the model's JSON parsed: ``[6500, 6600]``, ``6500-6600`` (a
    string, no quotes), ``5``, ``{'a': 1}``.
    """
    return (
        f"Error: The specified wavelength range {requested} is invalid or outside the available data range "
        f"[{lo:.1f}, {hi:.1f}]."
    )


def zoom_processing_error_text(reason: str) -> str:
    """Text answered (no image) for any other failure of the tool."""
    return f"Error processing spectral visualization: {reason}"


def no_points_reason(window: tuple) -> str:
    return f"No data points in specified wavelength range {tuple(window)}"


def unknown_tool_text(name: str) -> str:
    """The answer to a call naming another tool: the text of the KeyError raised by the tool lookup."""
    return TOOL_EXCEPTION_PREFIX + str(KeyError(name))


def bad_arguments_text(arguments) -> str:
    """The answer to a call whose arguments are not an object: the tool's ``parameters.get`` fails on them."""
    return TOOL_EXCEPTION_PREFIX + f"'{type(arguments).__name__}' object has no attribute 'get'"
