"""The first picture as training handed it to the vision tower: resized before the image processor saw it.

In RL training the full-spectrum picture of each SpecVI-Bench row went through verl's ``process_image``, i.e.
qwen-vl-utils 0.0.11 ``fetch_image``: RGBA composited on white, then resized with Pillow's bicubic filter to the
processor's ``smart_resize`` size (multiples of 28 px), and only then given to the image processor, which had
nothing left to resize (``verl/utils/dataset/vision_utils.py`` and ``rl_dataset.py``). Zoom pictures reached the
processor as the tool made them (RGBA, any size) and were resized by the processor itself.

A server resizes every picture it receives with its processor. For zoom pictures that is what training did (the
same processor route); for the first picture it is not: the processor's resize and Pillow's differ by up to 0.35 in
normalised pixel values (tests/test_model_pictures.py). So the client sends the first picture already resized the
way ``fetch_image`` resized it: the processor then sees a picture whose size it keeps, and its tensors equal
training's. The picture recorded in the catalog stays the rendered one (its sha256 is what ``catalog picture``
checks); this is only what goes on the wire.

The resize is Pillow's, and training's Pillow was 11.3.0: Pillow 13 gives other pixels for some sizes (the 6x4-inch
pictures, 312 px high, resized to 308), 12.x gives 11.3's on every size the renderer makes (measured with the
recipe's Pillow beside ours). The package requires Pillow < 13; under a newer one this warns once.
"""

from __future__ import annotations

import io
import logging
from functools import lru_cache

import numpy as np

from ..errors import RenderError
from .png import encode_png, pixels_of
from .tokens import smart_resize

log = logging.getLogger(__name__)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: the first Pillow release whose bicubic resize is not training's (11.3.0) on every picture size
PILLOW_RESIZE_CHANGED = 13


@lru_cache(maxsize=1)
def _check_pillow() -> None:
    import PIL

    if int(PIL.__version__.split(".")[0]) >= PILLOW_RESIZE_CHANGED:
        log.warning("Pillow %s resizes some first pictures differently from training's Pillow 11.3.0: install "
                    "'pillow<13' (what spec-vetting asks for) to send the model the pixels it was trained on",
                    PIL.__version__)


@lru_cache(maxsize=64)  # one full view serves every task and turn of a candidate: resized once
def first_picture_as_trained(png: bytes) -> bytes:
    """``png`` as qwen-vl-utils' ``fetch_image`` hands it on: RGB on white, resized (bicubic) to the processor's size.

    Returns ``png`` itself when there is nothing to change (already RGB at that size) or when it is not a PNG this
    can read (the server will say what is wrong with it, as it would have).
    """
    from PIL import Image, UnidentifiedImageError

    _check_pillow()
    if not png.startswith(PNG_SIGNATURE):
        return png
    pixels = pixels_of(png)
    if pixels is not None and pixels.shape[2] == 3:  # drawn here a moment ago, opaque: no decoding
        rgb = Image.fromarray(pixels, "RGB")
        height, width = smart_resize(rgb.height, rgb.width)
        if (width, height) == rgb.size:
            return png
        return encode_png(np.asarray(rgb.resize((width, height), Image.Resampling.BICUBIC)))
    try:
        with Image.open(io.BytesIO(png)) as img:
            img.load()
            if img.mode == "RGBA":
                rgb = Image.new("RGB", img.size, (255, 255, 255))
                rgb.paste(img, mask=img.split()[3])
            else:
                rgb = img.convert("RGB")
            height, width = smart_resize(rgb.height, rgb.width)
            if img.mode == "RGB" and (width, height) == img.size:
                return png
    except (UnidentifiedImageError, OSError, ValueError, RenderError):
        return png
    if (width, height) != rgb.size:
        rgb = rgb.resize((width, height), Image.Resampling.BICUBIC)
    # our writer, not Pillow's: the same pixels in a third of the time (Pillow tries a filter per row)
    return encode_png(np.asarray(rgb))
