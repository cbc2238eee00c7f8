"""The exact strings of the Spec-o3 training setup (SPEC_O3_PROTOCOL.md sections 2 and 3).

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

#: Qwen2.5-VL image markup as the chat template writes it for one image part.
IMAGE_MARKUP = "<|vision_start|><|image_pad|><|vision_end|>"

TOOL_RESPONSE_OPEN = "<tool_response>\n"
TOOL_RESPONSE_CLOSE = "\n</tool_response>"

#: Other keys that name a built-in task: SpecVI-Bench's ``data_source`` "cc" (protocol section 1) and the short
#: forms users type. The one table: task lists, label files, SpecVI-Bench rows and the rules engine all read it.
TASK_ALIASES = {"cc": "carbon", "cs": "carbon", "mg": "gm", "s": "ss"}

#: how a SpecVI-Bench prompt marks where the full-view image goes (the start of the user text)
IMAGE_PLACEHOLDER = "<image>"

#: Training limits (protocol section 2.7).
MAX_ASSISTANT_TURNS = 8
MAX_TOOL_RESPONSE_CHARS = 1024


def zoom_success_text(window: tuple | None, label: str | None) -> str:
    """Text answered with the image; ``window`` is the tuple of numbers as the model typed them."""
    if window is None:
        base = "Generated full spectrum visualization"
    else:
        base = f"Generated spectral visualization focused on wavelength range {tuple(window)!r} Å"
    return f"{base} for {label}." if label else f"{base}."


def zoom_invalid_range_text(requested: list, lo: float, hi: float) -> str:
    """Text answered (no image) for a window that is malformed, reversed or outside the data."""
    return (
        f"Error: The specified wavelength range {requested!r} is invalid or outside the available data range "
        f"[{lo:.1f}, {hi:.1f}]."
    )


def zoom_processing_error_text(reason: str) -> str:
    """Text answered (no image) for any other failure of the tool."""
    return f"Error processing spectral visualization: {reason}"


def no_points_reason(window: tuple) -> str:
    return f"No data points in specified wavelength range {tuple(window)!r}"
