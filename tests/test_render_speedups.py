"""The renderer's speed-ups change no pixel: PNG writer, cached text rendering, batched ticks, memoised layout."""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties
from PIL import Image

from spec_vetting.render import batched_axis, figure_path, plan, png, render_spectrum, text_renderer
from spec_vetting.render.png import encode_png
from spec_vetting.render.text_renderer import TextCachingRendererAgg

REPO = Path(__file__).resolve().parents[1]


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGBA"))


def _spectrum(n: int = 500, lo: float = 6000.0, hi: float = 7000.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = np.linspace(lo, hi, n)
    f = 5 + rng.normal(0, 0.2, n) + 4 * np.exp(-0.5 * ((w - 6563) / 4) ** 2)
    return w, f


@pytest.mark.parametrize("deflate", ["installed", "zlib"])
def test_png_writer_round_trips_opaque_and_translucent_buffers(deflate, monkeypatch):
    if deflate == "zlib":  # the fallback where ISA-L has no wheel
        monkeypatch.setattr(png, "_deflate", zlib.compress)
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(37, 53, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    with Image.open(io.BytesIO(encode_png(rgba))) as im:
        assert im.mode == "RGB" and im.size == (53, 37)
        assert np.array_equal(np.asarray(im), rgba[..., :3])
    rgba[0, 0, 3] = 7
    with Image.open(io.BytesIO(encode_png(rgba))) as im:
        assert im.mode == "RGBA"
        assert np.array_equal(np.asarray(im), rgba)


def test_a_rendered_picture_decodes_to_the_same_pixels_through_either_deflate(monkeypatch):
    from spec_vetting.render import fast_path

    w = np.linspace(3700.0, 9100.0, 3900)
    f = np.abs(np.random.default_rng(3).normal(200.0, 50.0, 3900))
    rgba = np.array(fast_path.draw_rgba(plan(w, f, None)))
    fast_png = png.encode_png(rgba)
    monkeypatch.setattr(png, "_deflate", zlib.compress)
    zlib_png = png.encode_png(rgba)
    for data in (fast_png, zlib_png):
        with Image.open(io.BytesIO(data)) as im:
            assert np.array_equal(np.asarray(im.convert("RGBA")), rgba)


@pytest.mark.parametrize("angle", [0.0, 90.0])
def test_cached_text_rendering_is_pixel_identical_at_many_subpixel_offsets(angle):
    prop = FontProperties(size=10)
    plain, cached = RendererAgg(120, 60, 80), TextCachingRendererAgg(120, 60, 80)
    for renderer in (plain, cached):
        gc = renderer.new_gc()
        # the same string at many fractional positions: cache hits must land exactly where matplotlib pastes it
        for i, x in enumerate(np.linspace(5.0, 60.0, 23)):
            renderer.draw_text(gc, x, 20.0 + (i % 5) * 7.31, "6550.25 Flux", prop, angle)
        gc.restore()
    assert np.array_equal(np.asarray(plain.buffer_rgba()), np.asarray(cached.buffer_rgba()))


def test_cached_text_extents_equal_matplotlibs():
    plain, cached = RendererAgg(120, 60, 80), TextCachingRendererAgg(120, 60, 80)
    for size, text in ((10, "6550.25"), (12, "Wavelength (Å)"), (9, "λ range: 3700.0 - 9100.0 Å"), (14, "")):
        prop = FontProperties(size=size, weight="bold" if size > 10 else "normal")
        for _ in range(2):  # computed, then from the cache
            assert cached.get_text_width_height_descent(text, prop, False) == plain.get_text_width_height_descent(
                text, prop, False
            )


def test_text_caches_stay_bounded(monkeypatch):
    monkeypatch.setattr(text_renderer._BITMAPS, "maxsize", 50)
    monkeypatch.setattr(text_renderer._EXTENTS, "maxsize", 50)
    renderer = TextCachingRendererAgg(200, 50, 80)
    gc = renderer.new_gc()
    prop = FontProperties(size=10)
    for i in range(120):
        renderer.draw_text(gc, 10.0, 20.0, f"{i:04d}", prop, 0.0)
        renderer.get_text_width_height_descent(f"{i:04d}", prop, False)
    gc.restore()
    sizes = text_renderer.cache_sizes()
    assert sizes["bitmaps"] <= 50
    assert sizes["extents"] <= 50
    assert sizes["text_layouts"] <= text_renderer.LAYOUT_CACHE_SIZE


@pytest.mark.slow
def test_memoised_layout_does_not_leak_between_pictures(baseline):
    """Pictures of different spans, titles and flux scales in a row, and back: each equals a fresh pyplot figure."""
    w, f = _spectrum(seed=1)
    cases = [
        (w, f, None, "Spectrum"),
        (w, f * 1e-3, (6540, 6590), "Spectrum"),
        (w, f * 1e4, (6540, 6590), "Spectrum: a_long_file_name.fits"),
        (w, f, (6200, 6900), "Spectrum"),
        (w, f, None, "Spectrum"),
    ]
    first = None
    for wl, fl, window, title in cases:
        got = _pixels(render_spectrum(wl, fl, window, title))
        assert np.array_equal(got, _pixels(baseline(wl, fl, window, title))), (window, title)
        first = got if first is None else first
    assert np.array_equal(first, got)  # the same full view before and after the others


@pytest.mark.slow
def test_crowded_ticks_of_a_one_point_window_match_matplotlib(baseline, monkeypatch):
    # matplotlib widens a one-point window by +-5 %: at 300 A that is 30 A, with 0.2 A minor ticks ~2.5 px apart
    crowded = []
    judge = batched_axis._crowded
    monkeypatch.setattr(batched_axis, "_crowded", lambda axis, ticks: crowded.append(judge(axis, ticks)) or crowded[-1])
    w, f = np.linspace(250.0, 350.0, 41), np.linspace(1.0, 2.0, 41)
    window = (299.0, 301.0)
    assert np.array_equal(_pixels(render_spectrum(w, f, window)), _pixels(baseline(w, f, window)))
    assert any(crowded), "the crowded-tick path was not exercised"
    crowded.clear()
    w, f = _spectrum(seed=2)
    figure_path.draw_with_figure(plan(w, f, (6500, 6620)))  # the figure path itself (render_spectrum goes fast)
    assert crowded and not any(crowded), "ordinary views must use the batched path"


def test_tick_memo_reuses_ticks_only_for_the_same_tick_space():
    """Ticks are reused across axes sizes only when the locators would see the same tick space."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import AutoLocator, MultipleLocator

    def figure(memoised: bool):
        fig = Figure(figsize=(3.0, 1.2), dpi=80)
        ax = fig.add_subplot()
        ax.plot([0.0, 1.0], [0.0, 7.3])
        if memoised:
            batched_axis.memoise_ticks(ax.yaxis)
        return fig, ax

    (fig_a, ax_a), (fig_b, ax_b) = figure(True), figure(False)
    spaces = set()
    for height in (1.2, 1.25, 1.6, 3.0, 1.6, 1.2):  # tiny axes: the y tick space (and bin count) changes
        for fig in (fig_a, fig_b):
            fig.set_size_inches(3.0, height)
        spaces.add(batched_axis._tick_space_used(ax_a.yaxis.get_major_locator(), ax_a.yaxis))
        got = [(t.get_loc(), t.label1.get_text()) for t in ax_a.yaxis._update_ticks()]
        want = [(t.get_loc(), t.label1.get_text()) for t in ax_b.yaxis._update_ticks()]
        assert got == want, height
    assert len(spaces) >= 3
    assert batched_axis._tick_space_used(MultipleLocator(5.0), ax_a.xaxis) is None
    assert batched_axis._tick_space_used(AutoLocator(), ax_a.yaxis)[0] == "bins"


def _tick_state(axis, ticks) -> list:
    """Where each tick to draw sits and what its label says, read from its artists."""
    along_x = axis.axis_name == "x"
    out = []
    for t in ticks:
        (line_pos,) = (t.gridline.get_xdata() if along_x else t.gridline.get_ydata())
        label_pos = t.label1.get_position()[0 if along_x else 1]
        out.append((t.get_loc(), float(line_pos), float(label_pos), t.label1.get_text(), t in axis.majorTicks))
    return out


@pytest.mark.parametrize("views", [
    # the tick count grows (new ticks are made, copying their neighbour's location) and shrinks, views overlap
    [(6500.0, 6600.0), (6480.0, 6700.0), (6500.0, 6600.0), (6560.0, 6566.0), (3600.0, 9800.0)],
    [(3600.0, 9800.0), (6540.0, 6590.0), (6400.0, 6700.0), (6541.0, 6589.0)],
])
def test_lean_tick_update_places_ticks_as_matplotlib_does(views):
    from matplotlib.figure import Figure
    from matplotlib.ticker import AutoMinorLocator, MultipleLocator

    def axes():
        ax = Figure(figsize=(6, 4), dpi=80).add_subplot()
        ax.xaxis.set_major_locator(MultipleLocator(20))
        ax.xaxis.set_minor_locator(MultipleLocator(5))
        ax.yaxis.set_minor_locator(AutoMinorLocator())
        return ax

    lean, plain = axes(), axes()  # plain: matplotlib's own Axis._update_ticks, the oracle
    for lo, hi in views:
        for ax in (lean, plain):
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo / 1000.0, hi / 900.0)
        for name in ("xaxis", "yaxis"):
            got_axis, want_axis = getattr(lean, name), getattr(plain, name)
            got = batched_axis.update_ticks_lean(got_axis)
            want = want_axis._update_ticks()
            assert _tick_state(got_axis, got) == _tick_state(want_axis, want)
            assert all(t.get_loc() == p for t in got for p in [_tick_state(got_axis, [t])[0][1]])


def test_the_first_picture_resized_from_remembered_pixels_equals_the_decoded_route():
    """model_picture takes a just-drawn picture's pixels from the PNG writer instead of decoding the PNG: the
    resized picture must be byte-identical to the one made by decoding it (the route training took)."""
    from spec_vetting.render.model_picture import first_picture_as_trained

    w = np.linspace(3700.0, 9100.0, 3900)
    f = np.abs(np.random.default_rng(4).normal(200.0, 50.0, 3900))
    drawn = render_spectrum(w, f)
    assert png.pixels_of(drawn) is not None
    from_pixels = first_picture_as_trained.__wrapped__(drawn)
    png._RECENT.clear()
    assert png.pixels_of(drawn) is None
    assert first_picture_as_trained.__wrapped__(drawn) == from_pixels
    with Image.open(io.BytesIO(from_pixels)) as im:
        assert im.size != Image.open(io.BytesIO(drawn)).size  # it was resized (the case worth checking)
