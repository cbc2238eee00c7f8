"""Prompt texts: version ids, the ``<image>`` placeholder of published data, and SpecVI-Bench prompt extraction.

The text sent to the model is the task text after the image and one newline (protocol section 2.3), so a task's
``prompt`` holds the text only: no placeholder, no leading newline.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

from ..errors import ConfigError
from ..io.specvi import message_text
from ..protocol import IMAGE_PLACEHOLDER, TASK_ALIASES

_CLASS_NAME = re.compile(r"\*\*(.+?)\*\*")


def prompt_version(prompt: str, source: str) -> str:
    """A stable id for a prompt text: where it came from plus a content hash prefix (recorded in every output)."""
    digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:12]
    return f"{source}-{digest}"


def strip_image_placeholder(text: str, *, where: str = "prompt") -> str:
    """The task text of a published user message ``<image>\\n<task text>``.

    The placeholder must come first (image then text is the trained layout); one newline after it is dropped
    because the conversation adds it back.
    """
    stripped = text.lstrip()
    if IMAGE_PLACEHOLDER not in stripped:
        return text[1:] if text.startswith("\n") else text
    if not stripped.startswith(IMAGE_PLACEHOLDER) or stripped.count(IMAGE_PLACEHOLDER) != 1:
        raise ConfigError(
            f"{where}: the {IMAGE_PLACEHOLDER} placeholder must open the user text exactly once (image, newline, "
            "task text); fix the prompt or write the task text by hand in a tasks YAML file"
        )
    rest = stripped[len(IMAGE_PLACEHOLDER):]
    return rest[1:] if rest.startswith("\n") else rest


def class_name_from_prompt(prompt: str) -> str | None:
    """The bold class name of the opening sentence (``... if it is a **Carbon Star (C-type)**.``)."""
    first = prompt.strip().splitlines()[0] if prompt.strip() else ""
    m = _CLASS_NAME.search(first)
    return m.group(1).strip() if m else None


def specvi_task_prompts(path: str | Path) -> dict[str, tuple[str, str | None]]:
    """Task key -> (the exact published task text, the system message's own text or None), from a SpecVI-Bench
    parquet file.

    When rows of a task disagree (they should not), the most common pair wins.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        table = pq.read_table(path, columns=["data_source", "prompt"])
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file; give the path of a SpecVI-Bench parquet file") from exc
    except Exception as exc:  # pyarrow raises several types for a bad file or missing column
        raise ConfigError(
            f"{path}: cannot read columns data_source and prompt ({exc}); is this a SpecVI-Bench parquet file?"
        ) from exc
    counts: dict[str, Counter] = {}
    for row, (source, prompt) in enumerate(
        zip(table.column("data_source").to_pylist(), table.column("prompt").to_pylist(), strict=True)
    ):
        if not source:
            continue
        text = message_text(prompt)
        if text is None:
            raise ConfigError(f"{path}, row {row}: the prompt cell holds no user message")
        key = TASK_ALIASES.get(str(source), str(source))
        pair = (strip_image_placeholder(text, where=f"{path}, row {row}"), message_text(prompt, "system"))
        counts.setdefault(key, Counter())[pair] += 1
    if not counts:
        raise ConfigError(f"{path}: no row with a data_source and a prompt")
    return {key: c.most_common(1)[0][0] for key, c in counts.items()}
