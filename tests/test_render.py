"""render_spectrum: bad input as the trained routine handles it, layout tables, PNG output, threads, memory, tokens."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spec_vetting.errors import RenderError
from spec_vetting.render import RENDERER_VERSION, SIZE_CLASSES, figure_path, image_tokens, render_spectrum, smart_resize
from spec_vetting.render.layout import emptiest_corner, figure_size, plan, x_tick_spacing
from spec_vetting.render.trained_figure import RENDERERS_PER_CANVAS

REPO = Path(__file__).resolve().parents[1]


def _spectrum(n: int = 600, lo: float = 6000.0, hi: float = 7000.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = np.linspace(lo, hi, n)
    f = 10 + 0.002 * (w - lo) + rng.normal(0, 0.3, n) + 8 * np.exp(-0.5 * ((w - 6563) / 5) ** 2)
    return w, f


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"))


def test_png_is_opaque_rgb_of_the_expected_size():
    w, f = _spectrum()
    png = render_spectrum(w, f, (6500, 6620))
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(png)) as im:
        assert im.mode == "RGB"
        # 7x4.5 in at 80 dpi, less the tight bounding box trim
        assert abs(im.size[0] - 551) <= 3 and abs(im.size[1] - 352) <= 3


def test_fast_matches_the_pyplot_baseline_pixel_for_pixel(baseline):
    w, f = _spectrum(seed=3)
    for window in (None, (6550, 6580), [6300.0, 6800.0]):
        assert np.array_equal(_pixels(render_spectrum(w, f, window)), _pixels(baseline(w, f, window))), window


def test_non_finite_points_are_dropped_and_input_sorted():
    w, f = _spectrum(seed=1)
    clean = _pixels(render_spectrum(w, f, (6500, 6620)))
    order = np.random.default_rng(5).permutation(w.size)
    w2, f2 = np.r_[w[order], np.nan, 6560.0, np.inf], np.r_[f[order], 3.0, np.nan, 1.0]
    assert np.array_equal(_pixels(render_spectrum(w2, f2, (6500, 6620))), clean)


def test_window_as_list_or_tuple_and_title():
    w, f = _spectrum(seed=2)
    a = render_spectrum(w, f, [6500, 6620])
    assert np.array_equal(_pixels(a), _pixels(render_spectrum(w, f, (6500.0, 6620.0))))
    assert not np.array_equal(_pixels(a), _pixels(render_spectrum(w, f, (6500, 6620), title="Spectrum: x.fits")))


def test_single_point_window_is_drawn():
    # small wavelengths keep matplotlib's +-5 % widening (and so the tick count) small
    w, f = np.linspace(10.0, 50.0, 41), np.linspace(1.0, 2.0, 41)
    lay = plan(w, f, (19.8, 20.2))
    assert lay.n_points == 1 and lay.stats_text.startswith("Data points: 1\n")
    assert _pixels(render_spectrum(w, f, (19.8, 20.2))).shape[2] == 3


@pytest.mark.parametrize(
    ("wavelength", "flux", "window", "match"),
    [
        (np.arange(10.0), np.ones(10), (20, 30), r"No data points in specified wavelength range \(20, 30\)"),
        (np.arange(10.0), np.ones(10), (2.5, 2.7), r"\(2\.5, 2\.7\)"),
        (np.full(5, np.nan), np.ones(5), None, "No finite data points"),
        (np.arange(10.0), np.ones(9), None, "same length"),
        (np.arange(10.0), np.ones(10), (1, 2, 3), "exactly two numbers"),
        (np.arange(10.0), np.ones(10), ("a", 3), "two numbers"),
        (np.arange(10.0), np.ones(10), "1-3", "pair"),
    ],
)
def test_bad_input_raises_render_error(wavelength, flux, window, match):
    with pytest.raises(RenderError, match=match):
        render_spectrum(wavelength, flux, window)


def test_figure_size_and_tick_tables():
    assert figure_size(5400, 3909, windowed=False) == (10.0, 6.0)
    assert figure_size(3000, 3909, windowed=False) == (8.0, 5.0)  # strictly greater than 3000 for 10x6
    assert figure_size(150, 3909, windowed=False) == (6.0, 4.0)
    assert figure_size(49.9, 30, windowed=True) == pytest.approx((6.0 * 0.95, 4.0))
    assert figure_size(120, 100, windowed=True) == (7.0, 4.5)
    assert figure_size(1000, 800, windowed=True) == (9.0, 5.5)
    assert figure_size(5400, 15000, windowed=False) == pytest.approx((10.5, 6.0))
    assert x_tick_spacing(5400) == (1000, 200)
    assert x_tick_spacing(120) == (25, 5)
    assert x_tick_spacing(4.9) == (1, 0.2)
    assert x_tick_spacing(0) == (1, 0.2)


def test_stats_box_goes_to_the_emptiest_corner_with_trained_tie_order():
    w = np.array([0.0, 1.0, 2.0, 3.0])
    assert emptiest_corner(w, np.array([0.0, 0.0, 0.0, 1.0])) == "top-left"  # empty top-left wins the tie with TR
    assert emptiest_corner(w, np.array([1.0, 0.0, 0.0, 0.0])) == "top-right"
    assert emptiest_corner(w, np.array([1.0, 1.0, 1.0, 0.0])) == "bottom-left"
    assert emptiest_corner(w, np.array([0.0, 1.0, 1.0, 1.0])) == "bottom-right"


def test_points_on_a_middle_line_count_on_both_sides():
    # the upstream routine counts with <= and >=: the point at the middle wavelength (2, 1) is in both top corners,
    # so TL 2, TR 2, BL 1, BR 1 and bottom-left wins (counting it on one side only would give top-left)
    w = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    assert emptiest_corner(w, np.array([0.0, 1.0, 1.0, 1.0, 0.0])) == "bottom-left"
    # a single point sits on both middle lines: all four corners hold it, the first in the tie order wins
    assert emptiest_corner(np.array([5.0]), np.array([3.0])) == "top-left"


def test_stats_text():
    lay = plan(np.array([4000.0, 5000.04, 4500.0]), np.array([2.0, 1234.5, 0.5]))
    assert lay.stats_text == "Data points: 3\nλ range: 4000.0 - 5000.0 Å\nFlux range: 5.00e-01 - 1.23e+03"


def test_image_tokens_match_qwen25_vl_smart_resize():
    assert image_tokens(792, 472) == 476  # 784 x 476 after resizing
    assert smart_resize(472, 792) == (476, 784)
    assert image_tokens(10, 10) == 4  # scaled up to min_pixels 3136 (56 x 56)
    assert image_tokens(5000, 5000) == 127 * 127  # scaled down under max_pixels (16384 tokens)
    assert {sc.tokens for sc in SIZE_CLASSES} >= {476, 176}
    with pytest.raises(RenderError):
        image_tokens(0, 10)


def test_concurrent_threads_get_the_same_pictures():
    w, f = _spectrum(seed=4)
    windows = [None, (6500, 6620), (6550, 6580), (6200, 6900)]
    expected = {i: _pixels(render_spectrum(w, f, win)) for i, win in enumerate(windows)}
    results, errors = {}, []

    def work(i):
        try:
            results[i] = _pixels(render_spectrum(w, f, windows[i % len(windows)]))
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, pixels in results.items():
        assert np.array_equal(pixels, expected[i % len(windows)])


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    pytest.skip("no /proc/self/status")


@pytest.mark.slow
def test_memory_and_caches_stay_flat_over_many_renders():
    w, f = _spectrum(n=300, seed=6)
    windows = [(6540, 6580), (6555, 6570), (6520, 6600)]
    for win in windows * 3:
        render_spectrum(w, f, win)
    start = _rss_mib()
    for i in range(40):
        render_spectrum(w, f, windows[i % 3])
    assert _rss_mib() - start < 8.0
    assert len(figure_path.FIGURES) <= 30
    assert all(len(fig.canvas._renderers) <= RENDERERS_PER_CANVAS for fig in figure_path.FIGURES.values())


def test_renderer_version_names_the_matplotlib_release():
    import matplotlib

    # the training environment's pin (Maxwell-Jia/spec-o3 reinforcement_learning/requirements_spec_o3.txt)
    assert matplotlib.__version__ == "3.10.5", "the trained pictures were made with matplotlib 3.10.5"
    assert RENDERER_VERSION.startswith("spec-o3-mpl3.10.5-")


def test_another_matplotlib_release_is_refused_with_what_to_install():
    from spec_vetting.render import check_matplotlib_version

    check_matplotlib_version("3.10.5")
    for other in ("3.11.2", "3.10.6", "3.10.5.post1"):
        expected = r"need matplotlib 3\.10\.5 exactly.*pip install 'matplotlib==3\.10\.5'"
        with pytest.raises(ImportError, match=expected):
            check_matplotlib_version(other)
