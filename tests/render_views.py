"""Generated views for the renderer tests: every size class, point counts from 2 to 12,000, flux from 1e-17 to 3e7
(offset texts on both axes), constant, zero, negative and NaN-holed flux, windows from 0.3 to 2,000 Å, sub-Ångström
windows around neighbouring pixels (no major x tick inside), empty and long titles.

``tests/data/render_views_baseline.json`` holds, for each view, the pixel size and the SHA-256 of the RGB pixels the
plain pyplot routine (benchmarks/render/baseline.py, itself identical to the upstream routine on all 365 shared
references) draws for it: ``python benchmarks/render/make_view_hashes.py`` writes it. The views are a pure function
of their seed (numpy's PCG64), so the test draws the same ones.
"""

from __future__ import annotations

import hashlib
import io

import numpy as np

#: seeds and views per seed in the stored file
SEEDS = tuple(range(24))
VIEWS_PER_SEED = 60
TITLES = ("Spectrum", "", "LAMOST J123456.78+123456.7 (a long title for a narrow figure)")


def views(seed: int, n: int = VIEWS_PER_SEED):
    """(wavelength, flux, window, title) tuples; the same ones for the same seed."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        if rng.random() < 0.25:
            yield _neighbour_window(rng)
            continue
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
        yield w, f, window, str(rng.choice(TITLES))


def _neighbour_window(rng):
    """A LAMOST-like grid (3,909 log-spaced pixels, 0.9-2.1 Å apart at rest) and a window holding 2 or 3 of them:
    the zooms that show no major x tick inside the view."""
    w = np.logspace(np.log10(3690.0), np.log10(9100.0), 3909) / (1.0 + rng.uniform(0.0, 0.5))
    f = _flux(rng, int(rng.integers(0, 7)), w.size, float(rng.choice([1e-17, 1, 468, 1e5])))
    i = int(rng.integers(0, w.size - 3))
    k = int(rng.integers(1, 3))
    gap_lo, gap_hi = w[i] - w[i - 1] if i else 1.0, w[i + k + 1] - w[i + k]
    window = (w[i] - rng.uniform(0.0, 0.9) * gap_lo, w[i + k] + rng.uniform(0.0, 0.9) * gap_hi)
    return w, f, window, str(rng.choice(TITLES))


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


def points_in(w, f, window) -> int:
    """How many points the picture plots (the trained routine's selection)."""
    keep = np.isfinite(w) & np.isfinite(f)
    if window is not None:
        keep &= (w >= window[0]) & (w <= window[1])
    return int(np.count_nonzero(keep))


def pixel_digest(png: bytes) -> tuple[list[int], str]:
    """([width, height], SHA-256 of the RGB pixels) of a PNG: the same for any two encodings of one picture."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        rgb = np.asarray(im.convert("RGB"))
    return [int(rgb.shape[1]), int(rgb.shape[0])], hashlib.sha256(np.ascontiguousarray(rgb).tobytes()).hexdigest()
