"""Qwen2.5-VL model inputs from a chat conversation, the way an OpenAI-compatible server builds them.

A server receives OpenAI-style message dicts (images as ``image_url`` data URLs), renders them with the chat
template, runs each image through the image processor, and widens every ``<|image_pad|>`` placeholder to the number
of tokens its image becomes (``grid_t * grid_h * grid_w / merge_size**2``: one token per 28x28 pixel block). This
module does the same in process, without ``AutoProcessor`` (whose Qwen2.5-VL video processor wants torchvision):
the PIL image processor is used directly and the placeholders are widened here, on token ids.

:func:`openai_messages` turns the client's wire-neutral :class:`Message` list into exactly those dicts, so the
in-process engine and a server see the same text, token for token.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError, EngineError
from ...types import Message

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from PIL import Image

IMAGE_PAD = "<|image_pad|>"

#: where the shipped Spec-o3 template lives in a source checkout (deploy/ is not part of the installed package)
DEPLOY_TEMPLATE = Path(__file__).resolve().parents[3] / "deploy" / "chat_template.jinja"


def openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """OpenAI chat messages exactly as the HTTP engine sends them (its own converter, :mod:`.wire`)."""
    from ..http.wire import messages_to_wire

    return messages_to_wire(messages)


def _image_from_part(part: dict[str, Any], where: str) -> Image.Image:
    from PIL import Image, UnidentifiedImageError

    raw: Any
    if part.get("type") == "image_url" or "image_url" in part:
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, dict) else spec
        if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
            raise EngineError(
                f"{where}: only base64 data URLs are accepted for images (got {str(url)[:40]!r}); "
                "send the PNG bytes inline as data:image/png;base64,...",
                kind="bad_request",
            )
        try:
            raw = base64.b64decode(url.split(";base64,", 1)[1], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise EngineError(f"{where}: the image data URL is not valid base64 ({exc})", kind="bad_request") from exc
    else:
        raw = part.get("image")
    if isinstance(raw, Image.Image):
        return raw.convert("RGB")
    try:
        with Image.open(io.BytesIO(raw)) as img:
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError, TypeError) as exc:
        raise EngineError(f"{where}: the image could not be decoded ({exc})", kind="bad_request") from exc


def images_in_order(messages: list[dict[str, Any]]) -> list[Image.Image]:
    """The conversation's images in the order the chat template writes their placeholders."""
    images = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, str) or content is None:
            continue
        for j, part in enumerate(content):
            if part.get("type") in ("image", "image_url") or "image" in part or "image_url" in part:
                images.append(_image_from_part(part, f"message {i} ({m.get('role')}), part {j}"))
    return images


def checkpoint_chat_template(model_path: Path) -> str | None:
    """The chat template a checkpoint folder carries, looked up where servers look: ``chat_template.jinja``, then
    ``chat_template`` in ``tokenizer_config.json``, then in the processor's ``chat_template.json``."""
    import json

    jinja = model_path / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    for name in ("tokenizer_config.json", "chat_template.json"):
        f = model_path / name
        if not f.is_file():
            continue
        try:
            value = json.loads(f.read_text(encoding="utf-8")).get("chat_template")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str) and value.strip():
            return value
    return None


def load_chat_template(model_path: Path, choice: str | None) -> tuple[str, str]:
    """The template text and where it came from.

    ``choice``: None uses the checkpoint's own template (what a server uses by default) and falls back to the
    shipped Spec-o3 template when the folder has none; ``"deploy"`` the shipped template; anything else a path.
    """
    if choice is None:
        own = checkpoint_chat_template(model_path)
        if own is not None:
            return own, f"{model_path.name} (checkpoint)"
        choice = "deploy"
    path = DEPLOY_TEMPLATE if choice == "deploy" else Path(choice)
    if not path.is_file():
        hint = (
            "the shipped template lives in deploy/chat_template.jinja of a source checkout; pass its path"
            if choice == "deploy"
            else "pass the path of a .jinja chat template file, or 'deploy'"
        )
        raise ConfigError(f"chat template {path} not found; {hint}")
    return path.read_text(encoding="utf-8"), str(path)


@dataclass
class QwenBatch:
    """Left-padded model inputs for a batch of conversations."""

    input_ids: torch.Tensor  # (B, L) long
    attention_mask: torch.Tensor  # (B, L) long, 0 on the left padding
    pixel_values: torch.Tensor | None  # (sum of patches, C*T*P*P)
    image_grid_thw: torch.Tensor | None  # (n_images, 3)
    prompt_tokens: list[int]  # per conversation, image tokens included (what a server reports)
    image_tokens: list[int]  # per conversation
    #: (B, L) int, 1 at image tokens, 0 elsewhere. Qwen2.5-VL's multimodal rotary positions (3-D over each image,
    #: text after an image continuing from the image's extent) are only computed by transformers 5.x when this is
    #: passed to the model; without it every position is 1-D and the prompt is not the one the model was trained on
    mm_token_type_ids: torch.Tensor | None = None

    def model_kwargs(self, device=None, dtype=None) -> dict[str, Any]:
        """The tensors a Qwen2.5-VL forward pass or ``generate`` takes, on ``device`` (pixels cast to ``dtype``)."""
        kwargs = {
            "input_ids": self.input_ids.to(device),
            "attention_mask": self.attention_mask.to(device),
            "mm_token_type_ids": self.mm_token_type_ids.to(device),
        }
        if self.pixel_values is not None:
            kwargs["pixel_values"] = self.pixel_values.to(device, dtype=dtype)
            kwargs["image_grid_thw"] = self.image_grid_thw.to(device)
        return kwargs


class QwenInputBuilder:
    """Chat template + image processor + placeholder widening: conversations in, padded tensors out."""

    def __init__(self, tokenizer, image_processor, chat_template: str, *, min_pixels=None, max_pixels=None):
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.chat_template = chat_template
        self.merge_size = int(getattr(image_processor, "merge_size", 2))
        self.image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        if self.image_token_id is None or self.image_token_id == tokenizer.unk_token_id:
            raise ConfigError(f"the tokenizer has no {IMAGE_PAD} token: not a Qwen2.5-VL tokenizer")
        size = image_processor.size
        lo = min_pixels if min_pixels is not None else size["shortest_edge"]
        hi = max_pixels if max_pixels is not None else size["longest_edge"]
        if lo > hi:
            raise ConfigError(f"min_pixels {lo} is larger than max_pixels {hi}")
        self.size = {"shortest_edge": int(lo), "longest_edge": int(hi)}
        pad = tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else tokenizer.convert_tokens_to_ids("<|endoftext|>")

    def render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> str:
        """The prompt text exactly as the server's template writes it (generation prompt included by default)."""
        return self.tokenizer.apply_chat_template(
            messages, chat_template=self.chat_template, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def image_token_count(self, grid_thw) -> int:
        t, h, w = (int(x) for x in grid_thw)
        return t * h * w // (self.merge_size**2)

    def build(self, conversations: list[list[dict[str, Any]]], *, add_generation_prompt: bool = True) -> QwenBatch:
        import torch

        rows: list[list[int]] = []
        all_images = []
        image_tokens = []
        for c, messages in enumerate(conversations):
            text = self.render(messages, add_generation_prompt=add_generation_prompt)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            images = images_in_order(messages)
            n_pads = sum(1 for t in ids if t == self.image_token_id)
            if n_pads != len(images):
                raise EngineError(
                    f"conversation {c}: the chat template wrote {n_pads} image placeholders for {len(images)} "
                    "images; check that the template writes one <|image_pad|> per image part",
                    kind="bad_request",
                )
            rows.append(ids)
            all_images.append(images)
        flat = [img for imgs in all_images for img in imgs]
        pixel_values = grid = None
        if flat:
            feats = self.image_processor(images=flat, size=self.size, return_tensors="pt")
            pixel_values, grid = feats["pixel_values"], feats["image_grid_thw"]
        # widen each placeholder to its image's token count, conversation by conversation, image by image
        k = 0
        widened = []
        for ids, _imgs in zip(rows, all_images, strict=True):
            out: list[int] = []
            n_img_tokens = 0
            for t in ids:
                if t == self.image_token_id:
                    n = self.image_token_count(grid[k])
                    out.extend([self.image_token_id] * n)
                    n_img_tokens += n
                    k += 1
                else:
                    out.append(t)
            widened.append(out)
            image_tokens.append(n_img_tokens)
        width = max(len(r) for r in widened)
        input_ids = torch.full((len(widened), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(widened), width), dtype=torch.long)
        for i, r in enumerate(widened):  # left padding: generation continues every row at the same column
            input_ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
        mm_types = (input_ids == self.image_token_id).to(torch.int32)
        return QwenBatch(input_ids, mask, pixel_values, grid, [len(r) for r in widened], image_tokens, mm_types)
