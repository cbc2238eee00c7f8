"""The scalar Bbox edges and union give numpy's answers bit for bit (oracle: np.min / np.max on the points)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from matplotlib.transforms import Affine2D, Bbox, TransformedBbox

from spec_vetting.render import bbox_edges

SPECIAL = [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-300, 3.0]


def _bits(value) -> bytes:
    return np.float64(value).tobytes()  # tells 0.0 from -0.0 and any NaN from a number


@pytest.fixture(autouse=True)
def scalar_edges():
    bbox_edges.install()
    yield
    bbox_edges.install()  # the renderer runs with them; leave the process as importing it does


def test_edges_equal_numpy_on_every_pair_of_special_values():
    for a, b in itertools.product(SPECIAL, repeat=2):
        box = Bbox([[a, b], [b, a]])
        points = np.array([[a, b], [b, a]], dtype=float)
        assert _bits(box.xmin) == _bits(np.min(points[:, 0])), (a, b)
        assert _bits(box.xmax) == _bits(np.max(points[:, 0])), (a, b)
        assert _bits(box.ymin) == _bits(np.min(points[:, 1])), (a, b)
        assert _bits(box.ymax) == _bits(np.max(points[:, 1])), (a, b)
        assert type(box.xmin) is np.float64


def test_union_equals_numpy_on_random_and_special_boxes():
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 5, 17):
        for _ in range(300):
            pts = rng.normal(0, 100, size=(n, 2, 2))
            mask = rng.random(pts.shape) < 0.15
            pts[mask] = rng.choice(SPECIAL, size=int(mask.sum()))
            boxes = [Bbox(p) for p in pts]
            got = Bbox.union(boxes).get_points()
            want = np.array([[np.min([np.min(p[:, 0]) for p in pts]), np.min([np.min(p[:, 1]) for p in pts])],
                             [np.max([np.max(p[:, 0]) for p in pts]), np.max([np.max(p[:, 1]) for p in pts])]])
            assert got.tobytes() == want.tobytes(), pts


def test_transformed_boxes_and_empty_union():
    box = TransformedBbox(Bbox([[0.0, 1.0], [2.0, 3.0]]), Affine2D().scale(-1.0, 2.0))
    assert (box.xmin, box.xmax, box.ymin, box.ymax) == (-2.0, -0.0, 2.0, 6.0)
    assert _bits(box.xmax) == _bits(np.max(box.get_points()[:, 0]))
    with pytest.raises(ValueError, match="cannot be empty"):
        Bbox.union([])


def test_uninstall_restores_matplotlib_and_install_again():
    original = bbox_edges.numpy_versions()
    bbox_edges.uninstall()
    try:
        assert Bbox.union.__code__ is original["union"].__code__
        assert Bbox.__dict__.get("xmin") is None and type(Bbox([[0, 0], [1, 1]])).xmin.fget is original["xmin"]
    finally:
        bbox_edges.install()
    assert Bbox.union.__code__ is not original["union"].__code__
