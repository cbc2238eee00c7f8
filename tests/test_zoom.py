"""The zoom tool answers exactly as the trained tool did (protocol section 3)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from spec_vetting.errors import RenderError
from spec_vetting.inspect.zoom import ZoomTool


class FakeRenderer:
    """Records calls; returns bytes naming the window (the real renderer is tested in test_render*)."""

    def __init__(self):
        self.calls = []

    def __call__(self, wavelength, flux, wavelength_range=None, title="Spectrum"):
        self.calls.append((wavelength.copy(), flux.copy(), wavelength_range, title))
        return f"PNG {wavelength_range} {title}".encode()


def tool(z=None, **kw):
    wl = np.linspace(3700.0, 9100.0, 3909)
    flux = np.sin(wl / 100.0) + 2.0
    r = FakeRenderer()
    return ZoomTool(wl, flux, redshift=z, renderer=r, **kw), r


@pytest.mark.parametrize(
    "rng, shown",
    [([6500, 6600], "(6500, 6600)"), ([6500.0, 6600.50], "(6500.0, 6600.5)"), ([4000, 4100.25], "(4000, 4100.25)")],
)
def test_success_text_prints_window_as_typed(rng, shown):
    t, r = tool()
    res = t.call({"wavelength_range": rng})
    assert res.text == f"Generated spectral visualization focused on wavelength range {shown} Å."
    assert res.image_png is not None and res.window == (float(rng[0]), float(rng[1]))
    assert r.calls[-1][2] == (float(rng[0]), float(rng[1]))


def test_label_and_full_view():
    t, r = tool()
    res = t.call({"wavelength_range": [6500, 6600], "label": "Hα region"})
    assert res.text == "Generated spectral visualization focused on wavelength range (6500, 6600) Å for Hα region."
    full = t.call({"label": "overview"})
    assert full.text == "Generated full spectrum visualization for overview."
    assert t.call({}).text == "Generated full spectrum visualization."
    # the full view is drawn once: identical bytes every turn
    assert full.image_png == t.full_view()
    assert sum(1 for c in r.calls if c[2] is None) == 1


@pytest.mark.parametrize(
    "rng, shown",
    [
        ([6600, 6500], "[6600, 6500]"),  # reversed
        ([6500, 6500], "[6500, 6500]"),  # empty
        ([1000, 2000], "[1000, 2000]"),  # below the data
        ([9500.5, 9900], "[9500.5, 9900]"),  # above the data
        (["6500", "6600"], "['6500', '6600']"),  # strings
        ([6500], "[6500]"),  # wrong length
        ([6500, 6600, 6700], "[6500, 6600, 6700]"),
        ("6500-6600", "6500-6600"),  # str() of the value, as spectral_visualization_tool.py:268-271
        ([False, True], "[False, True]"),  # booleans compare as 0 and 1: outside the data
        ([float("nan"), 6600], "[nan, 6600]"),
    ],
)
def test_invalid_windows_get_trained_error_text(rng, shown):
    t, r = tool()
    res = t.call({"wavelength_range": rng})
    assert res.text == (f"Error: The specified wavelength range {shown} is invalid or outside the available data "
                        "range [3700.0, 9100.0].")
    assert res.image_png is None and res.window is None
    assert r.calls == []


def test_rest_frame_division():
    t, r = tool(z=0.5)
    assert t.lo == pytest.approx(3700 / 1.5) and t.hi == pytest.approx(9100 / 1.5)
    res = t.call({"wavelength_range": [9000, 9100]})  # observed range, outside the rest-frame data
    assert res.text.endswith(f"data range [{3700 / 1.5:.1f}, {9100 / 1.5:.1f}].")
    t.call({"wavelength_range": [4300, 4400]})
    wl = r.calls[-1][0]
    assert wl[0] == pytest.approx(3700 / 1.5)
    # z = 0 and None leave the grid alone
    t0, r0 = tool(z=0.0)
    t0.full_view()
    assert r0.calls[0][0][0] == 3700.0


def test_no_points_in_accepted_window():
    wl = np.array([4000.0, 4001.0, 6000.0, 6001.0])
    t = ZoomTool(wl, np.ones(4), renderer=FakeRenderer())
    res = t.call({"wavelength_range": [4500, 5000]})
    assert res.text == ("Error processing spectral visualization: "
                        "No data points in specified wavelength range (4500, 5000)")
    assert res.image_png is None


def test_renderer_failures_become_processing_errors():
    def broken(*a, **k):
        raise RuntimeError("disk full")

    def no_points(*a, **k):
        raise RenderError("no point")

    t = ZoomTool(np.linspace(4000, 5000, 10), np.ones(10), renderer=broken)
    assert t.call({"wavelength_range": [4100, 4500]}).text == "Error processing spectral visualization: disk full"
    t = ZoomTool(np.linspace(4000, 5000, 10), np.ones(10), renderer=no_points)
    assert ("No data points in specified wavelength range (4100, 4500)"
            in t.call({"wavelength_range": [4100, 4500]}).text)
    # spectral_visualization_tool.py:248 calls parameters.get: on a string the agent loop answers the AttributeError
    assert t.call("not a dict").text == "Error when executing tool: 'str' object has no attribute 'get'"


def test_nan_flux_points_do_not_count():
    wl = np.linspace(4000, 5000, 11)
    flux = np.ones(11)
    flux[1:4] = np.nan  # 4100..4300 have no finite flux
    t = ZoomTool(wl, flux, renderer=FakeRenderer())
    assert "No data points" in t.call({"wavelength_range": [4150, 4250]}).text
    assert t.call({"wavelength_range": [4150, 4450]}).ok


def test_acall_runs_off_the_event_loop():
    import threading

    seen = []

    def renderer(wl, flux, wavelength_range=None, title="Spectrum"):
        seen.append(threading.current_thread() is threading.main_thread())
        return b"png"

    t = ZoomTool(np.linspace(4000, 5000, 10), np.ones(10), renderer=renderer)

    async def main():
        await t.afull_view()
        return await t.acall({"wavelength_range": [4100, 4500]})

    assert asyncio.run(main()).ok
    assert seen == [False, False]


def test_title_passed_to_renderer():
    t, r = tool(title="Spectrum: spec-1.fits")
    t.full_view()
    assert r.calls[0][3] == "Spectrum: spec-1.fits"


def test_single_point_window_is_drawn():
    wl = np.array([4000.0, 4500.0, 5000.0])
    t = ZoomTool(wl, np.ones(3), renderer=FakeRenderer())
    res = t.call({"wavelength_range": [4400, 4600]})
    assert res.ok and res.window == (4400.0, 4600.0)
    assert res.text == "Generated spectral visualization focused on wavelength range (4400, 4600) Å."


def test_real_renderer_behind_the_tool_on_unsorted_non_finite_input():
    """Bad input as the trained routine met it: unsorted, NaN/inf points (the renderer drops and sorts them)."""
    rng = np.random.default_rng(3)
    wl = rng.permutation(np.linspace(3700.0, 9100.0, 500))
    flux = 1.0 + rng.normal(0, 0.05, wl.size)
    flux[:20] = np.nan
    wl[20:25] = np.inf
    t = ZoomTool(wl, flux)
    res = t.call({"wavelength_range": [5000, 5400]})
    assert res.ok and res.image_png.startswith(b"\x89PNG"), res.text
    for bad in ([5000, 4000], [], ["a", "b"], [1, 2, 3], [10, 20]):
        out = t.call({"wavelength_range": bad})
        assert out.image_png is None and out.text.startswith("Error: The specified wavelength range")


def test_each_picture_is_drawn_once_per_tool():
    t, r = tool()
    first = t.call({"wavelength_range": [6500, 6600]})
    again = t.call({"wavelength_range": [6500.0, 6600.0], "label": "again"})  # the same window, typed otherwise
    assert again.image_png is first.image_png
    assert again.text.endswith("(6500.0, 6600.0) Å for again.")  # the text still follows what was typed
    assert [c[2] for c in r.calls] == [(6500.0, 6600.0)]
    t.call({"wavelength_range": [4000, 4100]})
    assert [c[2] for c in r.calls] == [(6500.0, 6600.0), (4000.0, 4100.0)]


def test_kept_pictures_are_bounded_and_redrawn_when_dropped():
    from spec_vetting.inspect.zoom import PICTURES_KEPT

    t, r = tool()
    windows = [[4000 + 10 * i, 4005 + 10 * i] for i in range(PICTURES_KEPT + 1)]
    for w in windows:
        t.call({"wavelength_range": w})
    assert len(t._windows) == PICTURES_KEPT
    t.call({"wavelength_range": windows[-1]})  # kept
    assert len(r.calls) == PICTURES_KEPT + 1
    t.call({"wavelength_range": windows[0]})  # the oldest was dropped: drawn again, the same picture
    assert len(r.calls) == PICTURES_KEPT + 2 and r.calls[-1][2] == (4000.0, 4005.0)


def test_one_tool_shared_by_threads_draws_the_full_view_once():
    import threading
    import time

    wl = np.linspace(3700.0, 9100.0, 500)
    calls = []

    def slow(wavelength, flux, wavelength_range=None, title="Spectrum"):
        calls.append(wavelength_range)
        time.sleep(0.05)  # long enough for every thread to ask while the first draws
        return b"PNG full"

    shared = ZoomTool(wl, np.ones_like(wl), renderer=slow)
    got = []
    threads = [threading.Thread(target=lambda: got.append(shared.full_view())) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert calls == [None] and got == [b"PNG full"] * 4
