"""The fast renderer reproduces the reference renders of the trained plotting routine (../shared/reference).

Bar (issue 3): same pixel size within 2 px; mean absolute RGB difference (0-255) <= 1.0 for >= 95 % of the cases
and <= 3.0 for every case. The worst cases are printed (run with -s to see them).
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from spec_vetting.render import render_spectrum


def _rgb(src) -> np.ndarray:
    with Image.open(src) as im:
        return np.asarray(im.convert("RGB"), dtype=np.int16)


def _mad(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute RGB difference; on a size mismatch, over the common top-left area."""
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    return float(np.abs(a[:h, :w] - b[:h, :w]).mean())


@pytest.fixture(scope="module")
def cases(reference_dir):
    renders = reference_dir / "renders"
    index = json.loads((renders / "index.json").read_text())
    arrays = {}
    for case in index:
        if case["spectrum"] not in arrays:
            with np.load(renders / f"{case['spectrum']}.npz") as z:
                arrays[case["spectrum"]] = (z["wavelength"], z["flux"])
    return renders, index, arrays


@pytest.mark.slow
def test_every_reference_case_matches(cases):
    renders, index, arrays = cases
    assert len(index) >= 45
    results = []
    for case in index:
        wavelength, flux = arrays[case["spectrum"]]
        png = render_spectrum(wavelength, flux, case["range"], case.get("title", "Spectrum"))
        got, ref = _rgb(io.BytesIO(png)), _rgb(renders / case["image"])
        assert list(ref.shape[1::-1]) == case["size"]
        size_diff = max(abs(got.shape[0] - ref.shape[0]), abs(got.shape[1] - ref.shape[1]))
        results.append((_mad(got, ref), size_diff, case["image"]))
    results.sort(reverse=True)
    print("\nworst reference cases (mean abs RGB diff, size diff px, image):")
    for mad, size_diff, name in results[:5]:
        print(f"  {mad:.3f}  {size_diff}  {name}")
    bad_size = [name for _, size_diff, name in results if size_diff > 2]
    assert not bad_size, f"pixel size off by more than 2 px: {bad_size}"
    assert results[0][0] <= 3.0, f"worst case {results[0][2]} differs by {results[0][0]:.3f} > 3.0"
    within = sum(mad <= 1.0 for mad, _, _ in results) / len(results)
    assert within >= 0.95, f"only {within:.0%} of the cases within 1.0: {results[:5]}"


def test_title_is_drawn(cases):
    """A wrong title must show up as a difference (guards the comparison itself against being blind)."""
    renders, index, arrays = cases
    case = next(c for c in index if c.get("title", "Spectrum").startswith("Spectrum: ") and c["range"] is None)
    wavelength, flux = arrays[case["spectrum"]]
    png = render_spectrum(wavelength, flux, None, "Spectrum")
    assert _mad(_rgb(io.BytesIO(png)), _rgb(renders / case["image"])) > 0.05
