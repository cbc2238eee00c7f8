"""Compare a renderer against every reference render:
`python benchmarks/render/compare.py [fast|figure|baseline]`.

The references are the upstream Spec-o3 plotting routine's output under matplotlib 3.10.5: the 80 cases of
``../shared/reference/renders_mpl3105`` and the 285 edge views of ``renders_mpl3105_edges``. ``fast`` is
``render_spectrum`` (the fast path, the figure path where it refuses), ``figure`` the figure path alone,
``baseline`` the plain pyplot routine (benchmarks/render/baseline.py). Prints one line per case (mean absolute RGB
difference, pixels that differ, sizes) and exits 1 unless every case has the same pixel size and the same pixels.
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
REFERENCES = [REPO.parent / "shared" / "reference" / name for name in ("renders_mpl3105", "renders_mpl3105_edges")]


def rgb(png: bytes | Path) -> np.ndarray:
    src = io.BytesIO(png) if isinstance(png, bytes) else png
    with Image.open(src) as im:
        return np.asarray(im.convert("RGB"), dtype=np.int16)


def mad(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute RGB difference over the common top-left area (a size mismatch is reported separately)."""
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    return float(np.abs(a[:h, :w] - b[:h, :w]).astype(np.float64).mean())


def load_cases(ref_dir: Path) -> list[dict]:
    cases = json.loads((ref_dir / "index.json").read_text())
    arrays = {}
    for case in cases:
        name = case["spectrum"]
        if name not in arrays:
            with np.load(ref_dir / f"{name}.npz") as z:
                arrays[name] = (z["wavelength"], z["flux"])
        case["wavelength"], case["flux"] = arrays[name]
        case["folder"] = ref_dir
    return cases


def main(which: str) -> int:
    if which == "baseline":
        from benchmarks.render.baseline import render_baseline as render
    elif which == "figure":
        from spec_vetting.render import figure_path, plan, png

        def render(*args):
            return png.encode_rows(*png.png_rows(figure_path.draw_with_figure(plan(*args))))
    else:
        from spec_vetting.render import render_spectrum as render
    rows = []
    for case in [case for folder in REFERENCES for case in load_cases(folder)]:
        png = render(case["wavelength"], case["flux"], case["range"], case.get("title", "Spectrum"))
        got, ref = rgb(png), rgb(case["folder"] / case["image"])
        same = got.shape == ref.shape and np.array_equal(got, ref)
        h, w = min(got.shape[0], ref.shape[0]), min(got.shape[1], ref.shape[1])
        n_diff = int(np.any(got[:h, :w] != ref[:h, :w], axis=2).sum())
        rows.append((not same, mad(got, ref), n_diff, case["image"], got.shape[1::-1], ref.shape[1::-1]))
    rows.sort(reverse=True)
    for differs, d, n_diff, name, got, ref in rows:
        print(f"{'DIFF' if differs else 'same'} {d:9.6f} {n_diff:6d} px  {name:40s} got {got} ref {ref}")
    n_same = sum(not r[0] for r in rows)
    print(f"{which}: {n_same} of {len(rows)} identical (same size, same pixels); "
          f"worst MAD {max(r[1] for r in rows):.6f}")
    return 0 if n_same == len(rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "fast"))
    except BrokenPipeError:  # piped into head
        sys.exit(1)
