"""Renderer speed, side by side: the fast renderer against the straightforward pyplot routine, same inputs.

    .venv/bin/python benchmarks/bench_render.py [--repeat 7] [--memory-renders 10000] [--skip-baseline]
        [--skip-timing] [--memory-window "10 Å"]

Prints ms per picture for the full view, windows of 10, 100 and 1000 Å (centred on Hα) and a window holding just two
neighbouring pixels (no major x tick inside) for each renderer and
the ratio: median wall clock, median CPU time of this process and fastest CPU time (the renderers take turns within
each repetition; each figure is the median over the inputs). Checks the two renderers give the same pixels on every
input, measures the resident memory over many fast renders (it must stay flat), and lists the image-token cost of
each size class. Inputs: the matplotlib 3.10.5 reference spectra in ../shared/reference/renders_mpl3105 when
present, else a synthetic LAMOST-like spectrum.
"""

from __future__ import annotations

import argparse
import io
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.render.baseline import render_baseline  # noqa: E402
from spec_vetting.render import SIZE_CLASSES, image_tokens, render_spectrum  # noqa: E402

REFERENCE = REPO.parent / "shared" / "reference" / "renders_mpl3105"
WINDOWS = {"full": None, "10 Å": (6558.0, 6568.0), "100 Å": (6513.0, 6613.0), "1000 Å": (6063.0, 7063.0),
           "2 px": "neighbours"}
# "2 px": a window holding the two pixels nearest Hα and nothing else (under 1-2 Å: no major x tick inside)


def window_for(window, w: np.ndarray):
    if window != "neighbours":
        return window
    ws = np.sort(w[np.isfinite(w)])
    i = int(np.clip(np.searchsorted(ws, 6563.0), 1, ws.size - 2))
    return (float(ws[i]) - 1e-3, float(ws[i + 1]) + 1e-3)


def inputs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    names = ["cv_like", "carbon_like", "real_lamost_dr1_M2", "real_sdss_wd"]
    found = {}
    for name in names:
        path = REFERENCE / f"{name}.npz"
        if path.exists():
            with np.load(path) as z:
                found[name] = (z["wavelength"], z["flux"])
    if not found:
        rng = np.random.default_rng(0)
        w = np.exp(np.linspace(np.log(3700.0), np.log(9100.0), 3909))
        f = 50 + 10 * np.sin(w / 700) + rng.normal(0, 1.5, w.size) + 120 * np.exp(-0.5 * ((w - 6563) / 4) ** 2)
        found["synthetic"] = (w, f)
    return found


def rss_mib() -> float:
    """Current resident set size (Linux /proc), in MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_ms(renders, w, f, window, repeat: int) -> list[tuple[float, float, float]]:
    """Per renderer: median wall-clock, median CPU and fastest CPU (this process) milliseconds per picture.

    CPU time is reported beside wall time because the benchmark machine is shared: other processes stretch the
    wall clock of both renderers, while CPU time counts only this process's work. The renderers take turns within
    each repetition, so a change of machine load falls on all of them alike.
    """
    for render in renders:
        render(w, f, window)  # warm-up: the fast renderer builds its figure for the size class once
    wall = [[] for _ in renders]
    cpu = [[] for _ in renders]
    for _ in range(repeat):
        for i, render in enumerate(renders):
            t0, c0 = time.perf_counter(), time.process_time()
            render(w, f, window)
            wall[i].append((time.perf_counter() - t0) * 1000)
            cpu[i].append((time.process_time() - c0) * 1000)
    return [(statistics.median(a), statistics.median(b), min(b)) for a, b in zip(wall, cpu, strict=True)]


def same_pixels(a: bytes, b: bytes) -> bool:
    ia, ib = (np.asarray(Image.open(io.BytesIO(x)).convert("RGB")) for x in (a, b))
    return ia.shape == ib.shape and bool((ia == ib).all())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7, help="timed renders per input and window (median reported)")
    ap.add_argument("--memory-renders", type=int, default=2000, help="fast renders in the memory check")
    ap.add_argument("--skip-baseline", action="store_true", help="time the fast renderer only")
    ap.add_argument("--skip-timing", action="store_true", help="only the memory check and the token table")
    ap.add_argument("--memory-window", choices=list(WINDOWS), default=None,
                    help="memory check on this view only (default: cycle through every input and view)")
    args = ap.parse_args()

    data = inputs()
    print(f"inputs: {', '.join(data)}; repeat {args.repeat}")
    print(f"{'view':>8} {'fast ms':>9} {'baseline ms':>12} {'ratio':>7} {'fast cpu':>9} {'base cpu':>9} {'ratio':>7}"
          f" {'fast min':>9} {'base min':>9} {'ratio':>7}  pixels")
    for label, view in ({} if args.skip_timing else WINDOWS).items():
        fast, base, identical = [], [], True
        for w, f in data.values():
            window = window_for(view, w)
            if args.skip_baseline:
                fast.append(time_ms([render_spectrum], w, f, window, args.repeat)[0])
                continue
            timed = time_ms([render_spectrum, render_baseline], w, f, window, args.repeat)
            fast.append(timed[0])
            base.append(timed[1])
            identical &= same_pixels(render_spectrum(w, f, window), render_baseline(w, f, window))
        # median over the inputs of each statistic
        fm, fc, fmin = (statistics.median(x) for x in zip(*fast, strict=True))
        if base:
            bm, bc, bmin = (statistics.median(x) for x in zip(*base, strict=True))
            print(f"{label:>8} {fm:9.1f} {bm:12.1f} {bm / fm:6.1f}x {fc:9.1f} {bc:9.1f} {bc / fc:6.1f}x"
                  f" {fmin:9.1f} {bmin:9.1f} {bmin / fmin:6.1f}x  {'identical' if identical else 'DIFFER'}")
        else:
            print(f"{label:>8} {fm:9.1f} {'':12} {'':7} {fc:9.1f} {'':9} {'':7} {fmin:9.1f}")

    # memory: cycle through inputs and windows so every size class figure is exercised
    views = [WINDOWS[args.memory_window]] if args.memory_window else list(WINDOWS.values())
    jobs = [(w, f, window_for(win, w)) for w, f in data.values() for win in views]
    for w, f, win in jobs:
        render_spectrum(w, f, win)
    start = rss_mib()
    marks = []
    t0 = time.perf_counter()
    for i in range(args.memory_renders):
        w, f, win = jobs[i % len(jobs)]
        render_spectrum(w, f, win)
        if (i + 1) % max(1, args.memory_renders // 5) == 0:
            marks.append(f"{i + 1}: {rss_mib():.1f}")
    elapsed = time.perf_counter() - t0
    print(
        f"memory over {args.memory_renders} fast renders ({args.memory_window or 'every view'})"
        f" ({elapsed / max(1, args.memory_renders) * 1000:.1f} ms avg):"
        f" start {start:.1f} MiB; " + "; ".join(marks)
    )

    print("image tokens (Qwen2.5-VL, typical pixel size):")
    for sc in SIZE_CLASSES:
        print(f"  {sc.view:6s} span {sc.span:24s} {sc.figsize[0]:5.2f}x{sc.figsize[1]:<4} in -> "
              f"{sc.typical_px[0]}x{sc.typical_px[1]} px -> {image_tokens(*sc.typical_px)} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
