"""The conversation as the token stream RL training built it, written out as text.

Training rendered the first messages once with the generation prompt, appended each generated turn as it was
generated (ending in the ``<|im_end|>`` the model stopped on, nothing after it) and each tool turn as the template
renders that one message with the generation prompt, minus the default system turn (verl ``ToolAgentLoop.run``).
As text: every system and user turn ``<|im_start|>role\\n`` + parts + ``<|im_end|>\\n``, every assistant turn
``<|im_start|>assistant\\n`` + its text + ``<|im_end|>`` with no newline after it. ``deploy/chat_template.jinja``
renders exactly this; the stock Qwen2.5-VL template adds one newline after each assistant turn.

The one client-side rendering: logs and debugging, and what ``spec-vet endpoints check`` asks a server's tokenizer
to tokenize beside its own rendering of the same messages.
"""

from __future__ import annotations

from .protocol import IMAGE_MARKUP
from .types import ImagePart, Message


def trained_stream_text(messages: list[Message], *, image_markup: str = IMAGE_MARKUP,
                        add_generation_prompt: bool = True) -> str:
    """``messages`` (system first, as the client builds them) as the text of training's token stream."""
    out = []
    for m in messages:
        body = "".join(image_markup if isinstance(p, ImagePart) else p.text for p in m.parts)
        out.append(f"<|im_start|>{m.role}\n{body}<|im_end|>" + ("" if m.role == "assistant" else "\n"))
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)
