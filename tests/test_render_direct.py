"""The direct Agg renderer draws the same bytes as matplotlib drawing the trained figure.

The oracle is the figure renderer (spec_vetting.render.fast.draw_with_figure): matplotlib's own tight layout, tight
bounding box and artist draw on the trained figure, itself held to the upstream references in
test_render_fidelity.py. The direct renderer shares none of that code path: it recomputes the layout and calls
Agg's primitives itself, so a difference in any step (a limit, a tick, a text position, a crop rounded the other
way) shows as different bytes here.
"""

from __future__ import annotations

import numpy as np
import pytest

from spec_vetting.errors import RenderError
from spec_vetting.render import direct, fast, plan, render_spectrum


def _views(seed: int, n: int):
    """Spectra and windows across the size classes, point counts, flux scales (offset texts on both axes) and
    titles the tool meets, edge cases included (constant, zero, negative, NaN-holed flux; windows of 0.3 A)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        count = int(rng.choice([2, 3, 10, 49, 51, 200, 1000, 3000, 12000]))
        lo = rng.uniform(3000, 9000)
        span = float(rng.choice([0.5, 3, 10, 40, 120, 400, 900, 2500, 6000]))
        w = np.sort(rng.uniform(lo, lo + span, count))
        scale = float(rng.choice([1e-17, 1e-3, 1, 468, 1e5, 3e7]))
        f = _flux(rng, int(rng.integers(0, 7)), count, scale)
        window = None
        if rng.random() < 0.6:
            a = rng.uniform(lo - 5, lo + span)
            window = (a, a + float(rng.choice([0.3, 1, 5, 30, 100, 500, 2000])))
        title = str(rng.choice(["Spectrum", "", "LAMOST J123456.78+123456.7 (a long title for a narrow figure)"]))
        yield w, f, window, title


def _flux(rng, kind: int, count: int, scale: float) -> np.ndarray:
    if kind == 0:
        return rng.normal(1, 0.1, count) * scale
    if kind == 1:
        return np.full(count, scale)
    if kind == 2:
        return rng.normal(0, 1, count) * scale
    if kind == 3:
        return 1e5 + rng.normal(0, 1, count)
    if kind == 4:
        return -np.abs(rng.normal(1, 0.3, count)) * scale
    if kind == 5:
        return np.where(rng.random(count) < 0.01, np.nan, rng.normal(5, 1, count)) * scale
    return np.zeros(count)


def _figure_bytes(lay) -> np.ndarray:
    return np.array(fast.draw_with_figure(lay))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_direct_pictures_equal_the_figures_byte_for_byte(seed):
    drawn = 0
    for w, f, window, title in _views(seed, 70):
        try:
            lay = plan(w, f, window, title)
        except RenderError:
            continue
        if lay.n_points < 2:  # a window that caught one point: the figure's (test below)
            continue
        expected = _figure_bytes(lay)
        got = np.array(direct.draw_rgba(lay))
        assert got.shape == expected.shape, (window, len(w), title)
        assert np.array_equal(got, expected), (window, len(w), title)
        drawn += 1
    assert drawn >= 40


def test_offset_texts_on_both_axes_are_placed_as_matplotlib_places_them():
    w = np.linspace(6540.2, 6540.6, 60)  # x ticks need an offset (+6.54e3)
    f = 1e5 + np.sin(w * 40.0)  # so do the y ticks (+1e5)
    lay = plan(w, f, None)
    assert np.array_equal(np.array(direct.draw_rgba(lay)), _figure_bytes(lay))


@pytest.mark.parametrize("case", ["one point", "mathtext title"])
def test_pictures_direct_does_not_reproduce_go_to_the_figure(case):
    w, f = np.linspace(4000.0, 8000.0, 500), np.linspace(1.0, 2.0, 500)
    args = {"one point": (w, f, (4000.0, 4000.1), "Spectrum"),
            "mathtext title": (w, f, None, r"$H\alpha$ region")}[case]
    lay = plan(*args)
    with pytest.raises(direct.Unsupported):
        direct.draw_rgba(lay)
    expected = fast.encode_rows(*fast.png_rows(fast.draw_with_figure(lay)))
    assert render_spectrum(*args) == expected


def test_the_tools_usual_views_are_all_drawn_directly(tmp_path):
    """The speed claim rests on this: the full view and the zooms the model asks for never fall back."""
    from spec_vetting.fixtures.examples import write_examples
    from spec_vetting.io.candidates import load_candidates

    write_examples(tmp_path, n=12, seed=1)
    for cand in load_candidates(tmp_path / "candidates.csv"):
        spec = cand.load_spectrum().rest_frame(None)
        for window in (None, (6540, 6590), (6400, 6700), (4800, 4900), (3900, 5400)):
            try:
                lay = plan(spec.wavelength, spec.flux, window)
            except RenderError:
                continue
            direct.draw_rgba(lay)  # raises Unsupported if it would fall back
