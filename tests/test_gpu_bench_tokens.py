"""benchmarks/gpu/bench_gpu.py must run where only torch/transformers/numpy exist, so it carries its own copy of
Qwen2.5-VL's resize rule; this keeps the copy equal to the renderer's (the GPU cost of each picture)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from spec_vetting.render.tokens import smart_resize

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "bench_gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("size", [(792, 472), (832, 472), (632, 392), (551, 352), (472, 312), (447, 312),
                                  (712, 432), (20, 20), (5000, 4000)])
def test_bench_resize_equals_the_renderer_token_rule(bench, size):
    width, height = size
    for max_pixels in (28 * 28 * 1280, 12845056):  # the bench's cap (as deploy/ sets the servers) and the default
        assert bench.smart_resize(height, width, max_pixels=max_pixels) == tuple(
            smart_resize(height, width, max_pixels=max_pixels))
