"""Write tests/data/render_views_baseline.json: the plain pyplot routine's pixels for every generated test view.

`python benchmarks/render/make_view_hashes.py` (about 0.3 s of CPU per view, ~7 minutes for the 1,440 views). The
oracle is benchmarks/render/baseline.py, which takes nothing from spec_vetting and draws the same pixels as the
upstream routine on all 365 shared references; tests/test_render_direct.py holds render_spectrum to this file and
re-derives a sample of it from the routine itself on every run.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from render_views import SEEDS, VIEWS_PER_SEED, pixel_digest, points_in, views  # noqa: E402

from benchmarks.render.baseline import render_baseline  # noqa: E402

OUT = REPO / "tests" / "data" / "render_views_baseline.json"


def main() -> int:
    import logging

    logging.getLogger("matplotlib.ticker").setLevel(logging.ERROR)  # "Locator attempting to generate ..." warnings
    warnings.simplefilter("ignore")
    rows = []
    for seed in SEEDS:
        for index, (w, f, window, title) in enumerate(views(seed, VIEWS_PER_SEED)):
            if points_in(w, f, window) < 2:  # nothing to draw, or one point (the figure path; its own test)
                continue
            size, digest = pixel_digest(render_baseline(w, f, window, title))
            rows.append({"seed": seed, "index": index, "size": size, "rgb_sha256": digest})
        print(f"seed {seed}: {len(rows)} views so far", file=sys.stderr)
    OUT.write_text(json.dumps({"views_per_seed": VIEWS_PER_SEED, "views": rows}, indent=0) + "\n")
    print(f"{len(rows)} views -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
