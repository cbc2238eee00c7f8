"""Compare a renderer against every reference render: `python benchmarks/render/compare.py [baseline|fast]`.

Prints one line per case (size, mean absolute RGB difference) and the worst cases; exits 1 when the fidelity
bar (size within 2 px, MAD <= 1.0 for >= 95 % of the cases, <= 3.0 for all) is not met.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
REFERENCE = REPO.parent / "shared" / "reference" / "renders"


def rgb(png: bytes | Path) -> np.ndarray:
    src = io.BytesIO(png) if isinstance(png, bytes) else png
    return np.asarray(Image.open(src).convert("RGB"), dtype=np.int16)


def mad(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute RGB difference over the common area, plus the area one image has and the other lacks."""
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    diff = np.abs(a[:h, :w] - b[:h, :w]).astype(np.float64)
    return float(diff.mean())


def load_cases(ref_dir: Path = REFERENCE) -> list[dict]:
    cases = json.loads((ref_dir / "index.json").read_text())
    arrays = {}
    for case in cases:
        name = case["spectrum"]
        if name not in arrays:
            with np.load(ref_dir / f"{name}.npz") as z:
                arrays[name] = (z["wavelength"], z["flux"])
        case["wavelength"], case["flux"] = arrays[name]
    return cases


def main(which: str) -> int:
    if which == "baseline":
        from benchmarks.render.baseline import render_baseline as render
    else:
        from spec_vetting.render import render_spectrum as render
    rows = []
    for case in load_cases():
        png = render(case["wavelength"], case["flux"], case["range"], case.get("title", "Spectrum"))
        got, ref = rgb(png), rgb(REFERENCE / case["image"])
        rows.append((mad(got, ref), case["image"], got.shape[1::-1], ref.shape[1::-1]))
    rows.sort(reverse=True)
    for d, name, got, ref in rows:
        print(f"{d:7.3f}  {name:40s} got {got} ref {ref}")
    size_ok = all(abs(g[0] - r[0]) <= 2 and abs(g[1] - r[1]) <= 2 for _, _, g, r in rows)
    frac = np.mean([d <= 1.0 for d, *_ in rows])
    print(f"{which}: size ok {size_ok}, {frac:.1%} <= 1.0, worst {rows[0][0]:.3f} ({rows[0][1]})")
    return 0 if size_ok and frac >= 0.95 and rows[0][0] <= 3.0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "fast"))
