"""The pixel values the vision tower receives through a server equal training's, for the first and the zoom pictures.

Training's rule (Maxwell-Jia/spec-o3 @ dd6eb91): the first picture of a row went through verl's ``process_image``
(``verl/utils/dataset/vision_utils.py``: qwen-vl-utils ``fetch_image``, which composites RGBA on white and resizes
with Pillow to the processor's 28-px grid) before the processor (``hf_processor(path, use_fast=True)``,
``verl/trainer/main_ppo.py``); each zoom picture reached the processor as the tool's PIL image, RGBA at its rendered
size (``tool_agent_loop.py``: ``self.processor(text=..., images=new_images_this_turn)``).

The comparison runs in the vLLM venv (torch, torchvision, transformers, vLLM and qwen-vl-utils 0.0.11, the version
the RL recipe pins): training's route with qwen-vl-utils' own ``fetch_image`` and the processor built as verl built
it, against the server's route with vLLM's own image loader and the processor built as vLLM builds it, on the
bytes spec-vetting sends. The processor is configured as a Qwen2.5-VL-7B checkpoint's (min/max pixels, patch, merge,
mean/std), not the tiny test model's. Pictures: every size class of the renderer (full views and windows, the
many/few-point widths) and the 68 reference renders made by the upstream routine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spec_vetting.engines.http.wire import ImageEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_server import VLLM_VENV, venv_problem  # noqa: E402

REQUIRE = os.environ.get("SPEC_VETTING_REQUIRE_SHARED") == "1"

#: a Qwen2.5-VL-7B-Instruct checkpoint's preprocessor_config.json (its image processor settings)
CHECKPOINT_PREPROCESSOR = {
    "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
}

#: the comparison itself, run by the vLLM venv's python (a script, so a GPU machine can run it too)
COMPARE_SCRIPT = Path(__file__).resolve().parent / "pixel_routes.py"
#: Pillow 11.3.0, the RL recipe's, beside the vLLM venv (`make vllm-venv`)
TRAINING_PILLOW = VLLM_VENV / "training-pillow"


def png_size(png: bytes) -> tuple[int, int]:
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _renderer_pictures() -> dict[str, bytes]:
    """One picture per size class of the renderer: full views of each span class, the many/few-point widths, and
    windows of each span class (protocol section 4)."""
    from spec_vetting.render import render_spectrum

    rng = np.random.default_rng(7)

    def spectrum(lo, hi, n):
        wl = np.linspace(lo, hi, n)
        return wl, 1.0 + 0.2 * np.sin(wl / 37.0) + 0.02 * rng.standard_normal(n)

    out = {}
    for name, (lo, hi, n) in {
        "full-span-gt3000": (3700, 9100, 3909), "full-span-gt1000": (4000, 6000, 2000),
        "full-span-gt200": (6000, 6600, 800), "full-span-le200": (6500, 6650, 300),
        "full-many-points": (3600, 9800, 12000), "full-few-points": (3700, 9100, 40),
    }.items():
        wl, flux = spectrum(lo, hi, n)
        out[name] = render_spectrum(wl, flux)
    wl, flux = spectrum(3700, 9100, 3909)
    for name, window in {"window-lt50": (6540, 6580), "window-lt200": (6500, 6620), "window-lt1000": (6000, 6800),
                         "window-ge1000": (4000, 6500)}.items():
        out[name] = render_spectrum(wl, flux, window)
    return out


def write_cases(folder: Path, reference_dir: Path) -> int:
    """The pictures, the bytes spec-vetting sends for each, and a checkpoint's processor settings, into ``folder``
    (what tests/pixel_routes.py reads; also carried to a GPU machine to compare there)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "preprocessor_config.json").write_text(json.dumps(CHECKPOINT_PREPROCESSOR))
    pictures = _renderer_pictures()
    # the upstream routine's own renders, one per picture size (the pixels differ, the route does not)
    sizes = {png_size(p) for p in pictures.values()}
    for ref in sorted((reference_dir / "renders_mpl3105").glob("*.png")):
        png = ref.read_bytes()
        if png_size(png) not in sizes:
            sizes.add(png_size(png))
            pictures["ref-" + ref.name] = png
    cases = []
    for name, png in pictures.items():
        encode = ImageEncoder()  # the bytes the HTTP engine puts on the wire, first picture and zoom
        (folder / f"{name}.png").write_bytes(png)
        cases.append({"rendered": f"{name}.png", "first_url": encode(png, first=True), "zoom_url": encode(png)})
    (folder / "cases.json").write_text(json.dumps(cases))
    return len(cases)


def test_first_and_zoom_pictures_reach_the_vision_tower_as_in_training(tmp_path, reference_dir):
    problem = venv_problem() or (None if (TRAINING_PILLOW / "PIL").is_dir() else
                                 f"{TRAINING_PILLOW} is missing; rebuild the vLLM venv with `make vllm-venv`")
    if problem:
        if REQUIRE:
            pytest.fail(problem)
        pytest.skip(problem)
    n = write_cases(tmp_path, reference_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # the recipe's Pillow for fetch_image (training's resize); the server's decode does not depend on it
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", PYTHONPATH=str(TRAINING_PILLOW))
    proc = subprocess.run([str(VLLM_VENV / "bin" / "python"), str(COMPARE_SCRIPT), str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["versions"]["pillow"] == "11.3.0", out["versions"]  # Spec-o3's requirements_spec_o3.txt
    results = out["results"]
    assert len(results) == n >= 10
    bad = [r for r in results if not (r["first_equal"] and r["zoom_equal"])]
    assert not bad, "\n".join(f"{r['name']} {r['size']}: first {r['first_diff']}, zoom {r['zoom_diff']}" for r in bad)
    # sending the rendered full view as it is would not do: the server's resize is not training's
    assert any(r["unresized_first_diff"] is None or r["unresized_first_diff"] > 0 for r in results)
