"""The GPU cost of a picture: Qwen2.5-VL image tokens, and the table of picture size classes.

Qwen2.5-VL's image processor resizes each image to multiples of 28 px (its ``smart_resize``: nearest multiple,
then scaled into [min_pixels, max_pixels] keeping the aspect ratio) and spends one token per 28x28 block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import RenderError
from . import style

PATCH = 28  # 14 px vision patches, merged 2x2 into one token
MIN_PIXELS = 56 * 56  # 3136, the processor default
MAX_PIXELS = 14 * 14 * 4 * 16384  # 12845056, the processor default
MAX_ASPECT = 200


def smart_resize(
    height: int, width: int, factor: int = PATCH, min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS
) -> tuple[int, int]:
    """(height, width) the Qwen2.5-VL processor resizes an image to."""
    if height <= 0 or width <= 0:
        raise RenderError(f"image size must be positive, got {width}x{height}")
    if max(height, width) / min(height, width) > MAX_ASPECT:
        raise RenderError(f"image aspect ratio of {width}x{height} exceeds {MAX_ASPECT}; Qwen2.5-VL refuses it")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def image_tokens(width: int, height: int) -> int:
    """Image tokens Qwen2.5-VL spends on a ``width`` x ``height`` picture (one per 28x28 block after resizing)."""
    h_bar, w_bar = smart_resize(int(height), int(width))
    return (h_bar // PATCH) * (w_bar // PATCH)


@dataclass(frozen=True)
class SizeClass:
    """One figure size of the trained routine and what its pictures typically cost."""

    view: str  # "full" or "window"
    span: str  # the plotted span (Å) that selects it
    figsize: tuple[float, float]  # inches, before the many/few points width factor
    typical_px: tuple[int, int]  # width, height after the tight bounding box (from the reference renders)

    @property
    def tokens(self) -> int:
        return image_tokens(*self.typical_px)


#: Every size class of the trained routine. Pixel sizes vary by a pixel or two with the tick labels (tight
#: bounding box); the typical sizes are the most common in the matplotlib 3.10.5 reference renders (the full views
#: of 6x4, 7x4.5 and 8x5 in, which no reference holds, as the windows of the same figure size); the token count is
#: what the typical size costs. Width x1.05 (>10000 points) and x0.95 (<50)
#: variants are listed where surveys produce them (a LAMOST pixel is ~1.4 Å, so windows under 50 Å hold < 50 points).
SIZE_CLASSES: tuple[SizeClass, ...] = (
    SizeClass("full", "> 3000", style.FULL_VIEW_SIZES[0][1], (792, 472)),
    SizeClass("full", "> 3000, > 10000 points", (10.5, 6.0), (832, 472)),
    SizeClass("full", "1000 - 3000", style.FULL_VIEW_SIZES[1][1], (632, 392)),
    SizeClass("full", "200 - 1000", style.FULL_VIEW_SIZES[2][1], (551, 351)),
    SizeClass("full", "<= 200", style.FULL_VIEW_DEFAULT_SIZE, (471, 312)),
    SizeClass("window", "< 50", style.WINDOW_SIZES[0][1], (471, 312)),
    SizeClass("window", "< 50, < 50 points (LAMOST)", (5.7, 4.0), (447, 312)),
    SizeClass("window", "50 - 200", style.WINDOW_SIZES[1][1], (551, 351)),
    SizeClass("window", "50 - 200, < 50 points", (6.65, 4.5), (523, 351)),
    SizeClass("window", "200 - 1000", style.WINDOW_SIZES[2][1], (632, 392)),
    SizeClass("window", ">= 1000", style.WINDOW_DEFAULT_SIZE, (711, 432)),
)
