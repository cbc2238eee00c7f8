"""Training's and a server's routes for the same pictures, compared (run by tests/test_model_pictures.py).

    python tests/pixel_routes.py FOLDER > results.json

FOLDER holds ``cases.json`` (per picture: the rendered PNG's file name, and the data URLs spec-vetting sends for it
as a first picture and as a zoom picture) and a checkpoint's ``preprocessor_config.json``. Training's route:
qwen-vl-utils ``fetch_image`` on the first picture, then the image processor built as verl built it
(``use_fast=True``); the tool's PIL image (RGBA) for a zoom. The server's route: vLLM's own image loader when vLLM is
installed (else the same steps with Pillow: RGBA pasted on white), then the processor with its default backend.
Needs torch, torchvision, transformers and qwen-vl-utils (not this package); prints one JSON object.
"""

from __future__ import annotations

import base64
import io
import json
import sys


def image_loader():
    """What the server does with an ``image_url`` part: vLLM's loader, or its steps (``rgba_to_rgb``) in Pillow."""
    from PIL import Image

    try:
        from vllm.multimodal.media.image import ImageMediaIO
    except ImportError:

        def load(data: bytes):
            img = Image.open(io.BytesIO(data))
            img.load()
            if img.mode == "RGBA":
                rgb = Image.new("RGB", img.size, (255, 255, 255))
                rgb.paste(img, mask=img.split()[3])
                return rgb
            return img.convert("RGB")

        return load, "pillow (vLLM's rgba_to_rgb steps)"
    loader = ImageMediaIO(image_mode="RGB")
    return (lambda data: loader.load_bytes(data).media), "vllm ImageMediaIO"


def main(folder: str) -> dict:
    import PIL
    import qwen_vl_utils
    import torch
    import transformers
    from PIL import Image
    from transformers import AutoImageProcessor

    cases = json.load(open(f"{folder}/cases.json"))
    trained = AutoImageProcessor.from_pretrained(folder, use_fast=True)  # verl: hf_processor(path, use_fast=True)
    served = AutoImageProcessor.from_pretrained(folder)  # a server: the processor's own default
    load, loader_name = image_loader()

    def same(a, b) -> bool:
        return (torch.equal(a["image_grid_thw"], b["image_grid_thw"])
                and a["pixel_values"].shape == b["pixel_values"].shape
                and torch.equal(a["pixel_values"], b["pixel_values"]))

    def diff(a, b) -> float | None:
        if a["pixel_values"].shape != b["pixel_values"].shape:
            return None
        return float((a["pixel_values"] - b["pixel_values"]).abs().max())

    def decoded(url: str) -> bytes:
        return base64.b64decode(url.split(",", 1)[1])

    results = []
    for c in cases:
        rendered = open(f"{folder}/{c['rendered']}", "rb").read()
        t_first = trained(images=[qwen_vl_utils.fetch_image({"image": Image.open(io.BytesIO(rendered))})],
                          return_tensors="pt")
        t_zoom = trained(images=[Image.open(io.BytesIO(rendered))], return_tensors="pt")
        s_first = served(images=[load(decoded(c["first_url"]))], return_tensors="pt")
        s_zoom = served(images=[load(decoded(c["zoom_url"]))], return_tensors="pt")
        s_raw = served(images=[load(rendered)], return_tensors="pt")
        results.append({"name": c["rendered"], "size": Image.open(io.BytesIO(rendered)).size,
                        "grid": t_first["image_grid_thw"].tolist(),
                        "first_equal": same(t_first, s_first), "first_diff": diff(t_first, s_first),
                        "zoom_equal": same(t_zoom, s_zoom), "zoom_diff": diff(t_zoom, s_zoom),
                        "unresized_first_diff": diff(t_first, s_raw)})
    versions = {"transformers": transformers.__version__, "torch": torch.__version__, "pillow": PIL.__version__,
                "processors": [type(trained).__name__, type(served).__name__], "server_loader": loader_name}
    return {"versions": versions, "results": results}


if __name__ == "__main__":
    json.dump(main(sys.argv[1]), sys.stdout)
