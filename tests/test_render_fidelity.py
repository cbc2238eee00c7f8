"""The renderers reproduce the pictures the model was trained on, pixel for pixel.

The oracle is ../shared/reference: the upstream Spec-o3 plotting routine and the tool's savefig, run under
matplotlib 3.10.5 (the training environment's pin): the 80 cases of renders_mpl3105 and the 285 edge views of
renders_mpl3105_edges (sub-Ångström windows, 2-3-point windows, the ends of the coverage, offset texts, constant
flux, empty and long titles). Every case must have the reference's pixel size and the same RGB values, through
render_spectrum (the fast path, the figure path where it refuses) and through the figure path alone. The plain
pyplot routine the generated-view tests use as their oracle (benchmarks/render/baseline.py) is held to the same
references here.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spec_vetting.render import figure_path, plan, png, render_spectrum

REPO = Path(__file__).resolve().parents[1]
RENDERS = "renders_mpl3105"  # renders/ (matplotlib 3.11.2) is superseded: not what the model saw
EDGES = "renders_mpl3105_edges"
# the baseline builds a figure per picture (~0.5 s CPU, tens of seconds for a one-point window): a sample covering
# every size class, a NaN/unsorted input, a title and a real spectrum, instead of all 80
BASELINE_SAMPLE = (
    "wd_like__full.png",
    "wd_like__6500-6620.png",
    "wd_like__4000-5000.png",
    "wd_like__6540-6580.png",
    "wd_like__5000-7000.png",
    "short40__6540-6580.png",
    "nan_unsorted__full.png",
    "dense__full.png",
    "real_lamost_dr10_K7__6500-6620.png",
)


def _rgb(src) -> np.ndarray:
    with Image.open(src) as im:
        return np.asarray(im.convert("RGB"), dtype=np.int16)


def _mad(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute RGB difference; on a size mismatch, over the common top-left area."""
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    return float(np.abs(a[:h, :w] - b[:h, :w]).mean())


def _load(renders: Path):
    index = json.loads((renders / "index.json").read_text())
    arrays = {}
    for case in index:
        if case["spectrum"] not in arrays:
            with np.load(renders / f"{case['spectrum']}.npz") as z:
                arrays[case["spectrum"]] = (z["wavelength"], z["flux"])
    return renders, index, arrays


@pytest.fixture(scope="module")
def cases(reference_dir):
    return _load(reference_dir / RENDERS)


@pytest.fixture(scope="module")
def edges(reference_dir):
    return _load(reference_dir / EDGES)


def _figure_renderer(wavelength, flux, window, title):
    return png.encode_rows(*png.png_rows(figure_path.draw_with_figure(plan(wavelength, flux, window, title))))


def _differences(render, renders: Path, index: list[dict], arrays: dict) -> list[tuple]:
    """(image, got size, reference size, MAD) for every case that is not pixel-identical; every case is drawn."""
    bad = []
    for case in index:
        wavelength, flux = arrays[case["spectrum"]]
        png = render(wavelength, flux, case["range"], case.get("title", "Spectrum"))
        got, ref = _rgb(io.BytesIO(png)), _rgb(renders / case["image"])
        assert list(ref.shape[1::-1]) == case["size"], f"index.json disagrees with {case['image']}"
        if got.shape != ref.shape or not np.array_equal(got, ref):
            bad.append((case["image"], got.shape[1::-1], ref.shape[1::-1], round(_mad(got, ref), 4)))
    return bad


@pytest.mark.slow
def test_every_reference_case_is_pixel_identical(cases):
    renders, index, arrays = cases
    assert len(index) == 80
    assert len({case["image"] for case in index}) == len(index)
    bad = _differences(render_spectrum, renders, index, arrays)
    assert not bad, f"{len(bad)} of {len(index)} cases differ (image, got size, reference size, MAD): {bad}"


@pytest.mark.slow
def test_every_edge_view_is_pixel_identical(edges):
    renders, index, arrays = edges
    assert len(index) == 285
    bad = _differences(render_spectrum, renders, index, arrays)
    assert not bad, f"{len(bad)} of {len(index)} edge views differ (image, got size, reference size, MAD): {bad}"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["references", "edges"])
def test_the_figure_renderer_alone_matches_every_case(which, cases, edges):
    renders, index, arrays = cases if which == "references" else edges
    bad = _differences(_figure_renderer, renders, index, arrays)
    assert not bad, f"{len(bad)} of {len(index)} cases differ through the figure renderer: {bad}"


@pytest.mark.slow
def test_the_baseline_routine_reproduces_the_references(cases, baseline):
    renders, index, arrays = cases
    sample = [case for case in index if case["image"] in BASELINE_SAMPLE]
    assert len(sample) == len(BASELINE_SAMPLE)
    assert not _differences(baseline, renders, sample, arrays)


@pytest.mark.slow
def test_the_baseline_routine_reproduces_the_edge_views(edges, baseline):
    """On every 12th edge view (all 285 were checked once: benchmarks/render/compare.py baseline)."""
    renders, index, arrays = edges
    assert not _differences(baseline, renders, index[::12], arrays)


def test_title_is_drawn(cases):
    """A wrong title must show up as a difference (guards the comparison itself against being blind)."""
    renders, index, arrays = cases
    case = next(c for c in index if c.get("title", "Spectrum").startswith("Spectrum: ") and c["range"] is None)
    wavelength, flux = arrays[case["spectrum"]]
    png = render_spectrum(wavelength, flux, None, "Spectrum")
    assert _mad(_rgb(io.BytesIO(png)), _rgb(renders / case["image"])) > 0.05


def test_size_classes_list_the_typical_reference_sizes(cases):
    """The token table's typical pixel size of each figure size is the commonest size among the references."""
    from collections import Counter

    from spec_vetting.render import SIZE_CLASSES
    from spec_vetting.render.layout import plan

    _, index, arrays = cases
    sizes: dict[tuple, Counter] = {}
    for case in index:
        figsize = plan(*arrays[case["spectrum"]], case["range"]).figsize
        sizes.setdefault((round(figsize[0], 6), round(figsize[1], 6)), Counter())[tuple(case["size"])] += 1
    checked = 0
    for sc in SIZE_CLASSES:
        found = sizes.get((round(sc.figsize[0], 6), round(sc.figsize[1], 6)))
        if found:
            assert sc.typical_px == found.most_common(1)[0][0], (sc, found)
            checked += 1
    assert checked >= 7
