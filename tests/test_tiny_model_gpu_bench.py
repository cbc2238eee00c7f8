"""The GPU measurement script (benchmarks/gpu/bench_gpu.py) runs its whole code path on a tiny config on the CPU.

The real run needs an H200 and is not part of the test suite; this keeps the script from rotting between GPU runs:
the same model construction, conversation growth, batched generation with forced lengths and the report.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import tiny_qwen  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "bench_gpu.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_script_imports_only_what_the_gpu_machine_has():
    allowed = {"torch", "transformers", "numpy", "argparse", "json", "math", "sys", "time", "__future__"}
    tree = ast.parse(SCRIPT.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    assert names <= allowed, names - allowed


@pytest.mark.slow  # mostly the first import of the Qwen2.5-VL model code when run alone
def test_smoke_run_reports_every_number(tmp_path):
    bench = _load()
    out = tmp_path / "gpu.json"
    with tiny_qwen.torch_threads(1):
        report = bench.main(["--smoke", "--turns", "3", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    (run,) = report["runs"]
    assert run["batch"] == 2 and run["turns"] == 3
    assert run["prefill_tok_s"] > 0 and run["decode_tok_s"] > 0 and run["gpu_s_per_inspection"] > 0
    # forced lengths: every turn generated exactly its (scaled) token count for every inspection
    expected = sum(max(2, int(n * 0.05)) for n in run["gen_tokens_per_turn"])
    assert run["decode_tokens"] == 2 * expected
    # full view + one zoom picture per tool response, at the renderer's sizes (792x472 -> 476 tokens)
    assert run["image_tokens"] >= 2 * (476 + 2 * 150)
    assert run["new_prompt_tokens"] < run["prefill_tokens"]  # the cache estimate prefills less than a re-send
    assert report["paper_gpu_s_per_spectrum"] == pytest.approx(1.6)


def test_image_token_counts_match_the_renderer_size_classes():
    bench = _load()
    assert bench.Image(792, 472).tokens == 476
    try:
        from spec_vetting.render import image_tokens
    except ImportError:
        pytest.skip("renderer not importable")
    for w, h in [bench.FULL_VIEW_PX, *bench.WINDOW_PX]:
        assert bench.Image(w, h).tokens == image_tokens(w, h)
