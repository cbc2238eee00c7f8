"""Quality of the rules engine, measured honestly: synthetic test set on unseen seeds, and the real files.

Usage::

    python benchmarks/rules_quality.py              # both tables (markdown) on the test seeds
    python benchmarks/rules_quality.py --calibrate  # fit p_yes = sigmoid(a * score + b) per task on the
                                                    # calibration seeds; paste each printed (a, b) into its task's
                                                    # calibration in spec_vetting/engines/rules/tasks.py
    python benchmarks/rules_quality.py --by-snr [--n 20] [--draws 4]
                                                    # the same at fixed S/N 2, 3, 5, 10, 30 (synthetic, test
                                                    # seeds) and the shared real normal stars degraded to it

Seeds. Thresholds and score weights were chosen looking only at calibration seeds 0-1999 (and at the real files);
the test set uses seeds 100000-101999, never looked at while choosing. Each task draws its positive kinds
(``TASK_POSITIVES``) and its hard-negative kinds (``TASK_CONFUSERS``) at one positive to five negatives, as the
SpecVI-Bench test split; S/N per pixel is drawn uniformly in 8-60 from the same seed.

Scoring. YES counts as a positive prediction; NO and UNDECIDED count as negative predictions for F1; accuracy
counts an UNDECIDED as wrong; the decided fraction is reported beside.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spec_vetting.engines.rules.decision import GATE_SCORE, decide  # noqa: E402
from spec_vetting.engines.rules.diagnostics import RestSpectrum  # noqa: E402
from spec_vetting.engines.rules.tasks import CALIBRATION_SEEDS  # noqa: E402
from spec_vetting.synthetic.synthetic import TASK_CONFUSERS, TASK_POSITIVES, make_spectrum  # noqa: E402

TASKS = ("cv", "carbon", "ss", "gm", "wd")
TEST_SEEDS = range(100_000, 102_000)
POSITIVES_PER_TASK = 60
NEGATIVE_RATIO = 5
SNR_RANGE = (8.0, 60.0)

#: published Spec-o3 F1 (protocol section 6), for the README table
PUBLISHED_F1 = {
    "Spec-o3-7B": {"cv": 81.0, "carbon": 80.2, "ss": 84.5, "gm": 83.4, "wd": 53.6},
    "GaiaNet": {"cv": 67.2, "carbon": 87.1, "ss": 70.3, "gm": 51.8, "wd": 48.2},
}


def task_samples(task: str, seeds: range, n_pos: int = POSITIVES_PER_TASK) -> list[tuple[str, int, float, bool]]:
    """(kind, seed, snr, is_positive) for one task: ``n_pos`` positives and confusers at 1:5, kinds in turn."""
    pos_kinds, neg_kinds = TASK_POSITIVES[task], TASK_CONFUSERS[task]
    n_neg = n_pos * NEGATIVE_RATIO
    out = []
    # seeds are spread over the range so tasks do not share (kind, seed) pairs in order
    offset = TASKS.index(task) * 7
    for i in range(n_pos + n_neg):
        seed = seeds.start + (offset + i * 3) % len(seeds)
        positive = i < n_pos
        kinds = pos_kinds if positive else neg_kinds
        kind = kinds[i % len(kinds)]
        snr = SNR_RANGE[0] + (SNR_RANGE[1] - SNR_RANGE[0]) * ((seed * 0.6180339887) % 1.0)
        out.append((kind, seed, snr, positive))
    return out


def evaluate_task(task: str, seeds: range) -> dict:
    rows = []
    for kind, seed, snr, positive in task_samples(task, seeds):
        sp = make_spectrum(kind, seed=seed, snr=snr)
        rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
        d = decide(rs, task)
        rows.append((kind, positive, d.verdict, d.score, d.p_yes))
    return {"task": task, "rows": rows}


def metrics(rows) -> dict:
    tp = sum(1 for _, pos, v, *_ in rows if pos and v == "YES")
    fp = sum(1 for _, pos, v, *_ in rows if not pos and v == "YES")
    fn = sum(1 for _, pos, v, *_ in rows if pos and v != "YES")
    correct = sum(1 for _, pos, v, *_ in rows if (v == "YES") == pos and v is not None)
    decided = sum(1 for _, _, v, *_ in rows if v is not None)
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"n": len(rows), "acc": correct / len(rows), "f1": f1, "decided": decided / len(rows),
            "tp": tp, "fp": fp, "fn": fn}


def fit_logistic(scores: np.ndarray, labels: np.ndarray, l2: float = 1e-3, fix_b: bool = False
                 ) -> tuple[float, float]:
    """Maximum-likelihood (a, b) of p = sigmoid(a * s + b) by Newton's method, lightly regularised; with
    ``fix_b`` only the slope is fitted (b = 0), so p_yes is 0.5 exactly where the score changes sign."""
    if fix_b:
        a = 1.0
        for _ in range(100):
            p = 1.0 / (1.0 + np.exp(-np.clip(a * scores, -50, 50)))
            g = np.sum((p - labels) * scores) + l2 * a
            h = np.sum(p * (1 - p) * scores * scores) + l2
            step = g / h
            a -= step
            if abs(step) < 1e-8:
                break
        return float(a), 0.0
    a, b = 1.0, 0.0
    for _ in range(100):
        x = a * scores + b
        p = 1.0 / (1.0 + np.exp(-np.clip(x, -50, 50)))
        w = p * (1 - p)
        g = np.array([np.sum((p - labels) * scores) + l2 * a, np.sum(p - labels) + l2 * b])
        h = np.array([[np.sum(w * scores * scores) + l2, np.sum(w * scores)],
                      [np.sum(w * scores), np.sum(w) + l2]])
        step = np.linalg.solve(h, g)
        a, b = a - step[0], b - step[1]
        if np.max(np.abs(step)) < 1e-8:
            break
    return float(a), float(b)


def calibrate() -> None:
    print(f"# calibration on seeds {CALIBRATION_SEEDS.start}-{CALIBRATION_SEEDS.stop - 1}")
    lines = []
    for task in TASKS:
        res = evaluate_task(task, CALIBRATION_SEEDS)
        # gate scores are fixed constants, not the task score: leave them out of the fit
        pts = [(s, pos) for _, pos, v, s, _ in res["rows"] if s is not None and s != GATE_SCORE]
        scores = np.array([s for s, _ in pts])
        labels = np.array([1.0 if pos else 0.0 for _, pos in pts])
        a_free, b_free = fit_logistic(scores, labels)
        a, b = fit_logistic(scores, labels, fix_b=True)
        # metrics as the engine will decide with the fitted constants (gated rows stay NO)
        refit = [(k, pos, None if v is None else ("YES" if s is not None and s != GATE_SCORE and a * s + b >= 0
                                                  else "NO"), s, None) for k, pos, v, s, _ in res["rows"]]
        m = metrics(refit)
        print(f"{task}: a={a:.3f} b={b:.3f} (free fit: a={a_free:.3f} b={b_free:.3f}, its boundary at score "
              f"{-b_free / a_free:+.2f}; move the score's threshold if far from 0) calibration acc {m['acc']:.3f}, "
              f"F1 {m['f1']:.3f}, decided {m['decided']:.3f}")
        lines.append(f'    {task}: calibration=({a:.3f}, {b:.3f}),')
    print("\n".join(lines))
    print(f"CALIBRATION_SEEDS = range({CALIBRATION_SEEDS.start}, {CALIBRATION_SEEDS.stop})")


def synthetic_table(seeds: range, verbose: bool = False) -> str:
    out = ["| task | positives : negatives | accuracy | F1 (YES) | decided | TP | FP | FN |",
           "|---|---|---|---|---|---|---|---|"]
    f1s, accs = [], []
    for task in TASKS:
        res = evaluate_task(task, seeds)
        m = metrics(res["rows"])
        f1s.append(m["f1"])
        accs.append(m["acc"])
        n_pos = sum(1 for r in res["rows"] if r[1])
        out.append(f"| {task} | {n_pos} : {m['n'] - n_pos} | {100 * m['acc']:.1f} | {100 * m['f1']:.1f} | "
                   f"{100 * m['decided']:.1f}% | {m['tp']} | {m['fp']} | {m['fn']} |")
        if verbose:
            for kind in sorted({r[0] for r in res["rows"]}):
                sub = [r for r in res["rows"] if r[0] == kind]
                yes = sum(1 for r in sub if r[2] == "YES")
                und = sum(1 for r in sub if r[2] is None)
                print(f"  {task:6s} {kind:12s} n={len(sub):3d} YES={yes:3d} UNDECIDED={und:3d}", file=sys.stderr)
    out.append(f"| **mean** | | {100 * np.mean(accs):.1f} | {100 * np.mean(f1s):.1f} | | | | |")
    return "\n".join(out)


def reliability_table(seeds: range, n_bins: int = 5) -> str:
    """Reliability diagram as a table: predicted p_yes in bins against the observed fraction of positives, all
    tasks pooled and per task, on ``seeds`` (held out: the test seeds)."""
    rows = []
    for task in TASKS:
        rows += [(task, p, pos) for _, pos, v, s, p in evaluate_task(task, seeds)["rows"] if p is not None]
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    out = ["| p_yes bin | n | mean p_yes | observed YES fraction | " + " | ".join(f"{t} n / obs" for t in TASKS) + " |",
           "|---|---|---|---|" + "---|" * len(TASKS)]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sel = [(t, p, pos) for t, p, pos in rows if lo <= p < hi or (hi == 1.0 and p == 1.0)]
        if not sel:
            continue
        per = []
        for task in TASKS:
            sub = [pos for t, _, pos in sel if t == task]
            per.append(f"{len(sub)} / {np.mean(sub):.2f}" if sub else "-")
        out.append(f"| {lo:.1f}-{hi:.1f} | {len(sel)} | {np.mean([p for _, p, _ in sel]):.3f} | "
                   f"{np.mean([pos for *_, pos in sel]):.3f} | " + " | ".join(per) + " |")
    return "\n".join(out)


#: real sets and what their labels say; "normal": every task should be NO (gm excepted for M stars of unknown
#: luminosity class); "dwarf": M dwarfs of the literature, every task NO; positives by task
def _real_files():
    """(set, path) of every real file used: ../shared/data/real and tests/data/real (duplicates once)."""
    shared = REPO.parent / "shared" / "data" / "real"
    here = REPO / "tests" / "data" / "real"
    out, seen = [], set()
    for sub in ("lamost", "sdss"):
        for base in (shared, here):
            d = base / sub if sub != "sdss" or base == shared else None
            if d is None or not d.exists():
                continue
            for p in sorted(d.iterdir()):
                if p.name.startswith("med-") or p.suffix not in (".fits", ".gz") or p.name in seen:
                    continue
                seen.add(p.name)
                out.append(("shared" if base == shared else "tests", p))
    for p in sorted(here.glob("*.fits*")):
        if p.name not in seen and not p.name.startswith(("coadd-", "redrock-")):
            seen.add(p.name)
            out.append(("tests", p))
    for name in ("coadd-4-80613-thru20210324.fits", "coadd-special-dark-27247.fits"):
        p = shared / "desi" / name if (shared / "desi" / name).exists() else here / name
        if p.exists():
            out.append(("shared", p))
    out += [("mdwarfs", p) for p in sorted((here / "mdwarfs").glob("*.fits"))]
    out += [("lamost_dr1", p) for p in sorted((here / "lamost_dr1").glob("*.fits"))]
    return out


def real_rows():
    from spec_vetting.io import iter_spectra

    rows = []
    for group, p in _real_files():
        for sp in iter_spectra(p):
            if p.parent.name == "desi" or p.name.startswith("coadd-"):
                if not sp.meta.pipeline_class:
                    continue
            rs = RestSpectrum.from_spectrum(sp, sp.meta.redshift)
            cls = " ".join(x for x in (sp.meta.pipeline_class, sp.meta.pipeline_subclass) if x)
            verdicts = {t: decide(rs, t, redshift_known=sp.meta.redshift is not None) for t in TASKS}
            rows.append((group, p.name, cls, sp.meta.redshift, verdicts))
    return rows


def _truth(group: str, cls: str) -> dict[str, str]:
    """Per task: "pos", "neg" or "any" (not scored: an M star of unknown luminosity class for gm)."""
    t = {task: "neg" for task in TASKS}
    if "WD" in cls:
        t["wd"] = "pos"
    sub = cls.split()[-1] if cls else ""
    if group != "mdwarfs" and sub[:1] == "M":
        t["gm"] = "any"
    return t


def real_table(rows) -> str:
    out = ["| set | file | survey class (not read by the engine) | z | " + " | ".join(TASKS) + " |",
           "|---|---|---|---|" + "---|" * len(TASKS)]
    for group, name, cls, z, verdicts in rows:
        cells = ["UNDECIDED" if d.verdict is None else f"{d.verdict} ({d.p_yes:.2f})" for d in verdicts.values()]
        out.append(f"| {group} | {name} | {cls} | {'unknown' if z is None else f'{z:.4f}'} | " + " | ".join(cells)
                   + " |")
    return "\n".join(out)


def real_summary(rows) -> str:
    """Per task: false positives among the real negatives, recall on the real positives, undecided counts."""
    out = ["| task | real negatives | false positives (YES) | undecided | real positives | recall | not scored |",
           "|---|---|---|---|---|---|---|"]
    for task in TASKS:
        neg = fp = und = pos = tp = anyc = 0
        for group, _name, cls, _z, verdicts in rows:
            truth, d = _truth(group, cls)[task], verdicts[task]
            if truth == "any":
                anyc += 1
            elif truth == "pos":
                pos += 1
                tp += d.verdict == "YES"
            else:
                neg += 1
                fp += d.verdict == "YES"
                und += d.verdict is None
        out.append(f"| {task} | {neg} | {fp} | {und} | {pos} | {f'{tp}/{pos}' if pos else '-'} | {anyc} |")
    return "\n".join(out)


SNR_LEVELS = (2.0, 3.0, 5.0, 10.0, 30.0)


def _shared_normal_stars():
    """(name, spectrum, truth per task) of the shared real LAMOST stars: every task NO, gm any for the M star."""
    from spec_vetting.io import read_spectrum

    out = []
    for p in sorted((REPO.parent / "shared" / "data" / "real" / "lamost").iterdir()):
        if p.name.startswith("med-") or p.suffix not in (".fits", ".gz"):
            continue
        sp = read_spectrum(p)
        cls = " ".join(x for x in (sp.meta.pipeline_class, sp.meta.pipeline_subclass) if x)
        out.append((p.name, sp, _truth("shared", cls)))
    return out


def _snr_table_head(cell: str) -> list[str]:
    """Header and rule of a markdown table with a task column and one ``cell`` column per S/N level."""
    return ["| task | " + " | ".join(f"S/N {s:g}: {cell}" for s in SNR_LEVELS) + " |",
            "|---|" + "---|" * len(SNR_LEVELS)]


def by_snr(n_pos: int, draws: int) -> str:
    """Tables by S/N: synthetic recall, false positives and UNDECIDED rates per task; the shared real normal stars
    degraded to each S/N (``draws`` noise draws each); calibration of p_yes per S/N."""
    from spec_vetting.synthetic.degrade import degrade

    synth = {}  # (task, snr) -> rows (kind, positive, verdict, score, p_yes)
    for task in TASKS:
        for snr in SNR_LEVELS:
            rows = []
            for kind, seed, _snr, positive in task_samples(task, TEST_SEEDS, n_pos):
                sp = make_spectrum(kind, seed=seed, snr=snr)
                d = decide(RestSpectrum.from_spectrum(sp, sp.meta.redshift), task)
                rows.append((kind, positive, d.verdict, d.score, d.p_yes))
            synth[task, snr] = rows
    out = [f"### Synthetic (test seeds, {n_pos} positives : {n_pos * NEGATIVE_RATIO} hard negatives per task and "
           "S/N)", "", "recall = YES among positives; FP = YES among negatives; UND = UNDECIDED share of all; "
           "NO-neg = firm NO among negatives", "", *_snr_table_head("recall / FP / UND / NO-neg")]
    for task in TASKS:
        cells = []
        for snr in SNR_LEVELS:
            rows = synth[task, snr]
            pos = [r for r in rows if r[1]]
            neg = [r for r in rows if not r[1]]
            rec = sum(r[2] == "YES" for r in pos) / len(pos)
            fp = sum(r[2] == "YES" for r in neg)
            und = sum(r[2] is None for r in rows) / len(rows)
            no = sum(r[2] == "NO" for r in neg) / len(neg)
            cells.append(f"{100 * rec:.0f}% / {fp} / {100 * und:.0f}% / {100 * no:.0f}%")
        out.append(f"| {task} | " + " | ".join(cells) + " |")

    stars = _shared_normal_stars()
    rng = np.random.default_rng(2026)
    real = {}  # (task, snr) -> list of (truth, verdict)
    for snr in SNR_LEVELS:
        for _name, sp, truth in stars:
            for _ in range(draws):
                deg = degrade(sp, snr, rng)
                rs = RestSpectrum.from_spectrum(deg, deg.meta.redshift)
                for task in TASKS:
                    real.setdefault((task, snr), []).append((truth[task], decide(rs, task).verdict))
    out += ["", f"### Shared real normal stars degraded ({len(stars)} LAMOST stars x {draws} noise draws per S/N; "
            "a level above a star's own S/N leaves it as observed)", "",
            "FP = YES on a star that is not of the class (target 0); NO = firm NO share; UND = UNDECIDED share "
            "(the M2 star is not counted for gm)", "", *_snr_table_head("FP / NO / UND")]
    for task in TASKS:
        cells = []
        for snr in SNR_LEVELS:
            rows = [v for t, v in real[task, snr] if t == "neg"]
            cells.append(f"{sum(v == 'YES' for v in rows)} / {100 * sum(v == 'NO' for v in rows) / len(rows):.0f}% / "
                         f"{100 * sum(v is None for v in rows) / len(rows):.0f}%")
        out.append(f"| {task} | " + " | ".join(cells) + " |")

    edges = (0.0, 0.1, 0.5, 0.9, 1.0)
    out += ["", "### Calibration of p_yes by S/N (synthetic, decided rows, all tasks pooled)", "",
            "each cell: n / mean p_yes / observed fraction of positives", "",
            "| S/N | " + " | ".join(f"p_yes {lo:g}-{hi:g}" for lo, hi in zip(edges[:-1], edges[1:], strict=True))
            + " | Brier |", "|---|" + "---|" * len(edges)]
    for snr in SNR_LEVELS:
        pts = [(r[4], r[1]) for task in TASKS for r in synth[task, snr] if r[4] is not None and r[2] is not None]
        cells = []
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            sel = [(p, pos) for p, pos in pts if lo <= p < hi or (hi == 1.0 and p == 1.0)]
            cells.append(f"{len(sel)} / {np.mean([p for p, _ in sel]):.2f} / {np.mean([pos for _, pos in sel]):.2f}"
                         if sel else "-")
        brier = np.mean([(p - pos) ** 2 for p, pos in pts]) if pts else float("nan")
        out.append(f"| {snr:g} | " + " | ".join(cells) + f" | {brier:.3f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibrate", action="store_true", help="fit the logistic calibration on calibration seeds")
    ap.add_argument("--on-calibration-seeds", action="store_true",
                    help="print the synthetic table on the calibration seeds (for tuning; never report it)")
    ap.add_argument("--verbose", action="store_true", help="per-kind YES/UNDECIDED counts on stderr")
    ap.add_argument("--by-snr", action="store_true",
                    help=f"tables at fixed S/N {', '.join(f'{s:g}' for s in SNR_LEVELS)} instead")
    ap.add_argument("--n", type=int, default=20, help="with --by-snr: positives per task and S/N (x5 negatives)")
    ap.add_argument("--draws", type=int, default=4,
                    help="with --by-snr: noise draws per real star and S/N")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.calibrate:
        calibrate()
        return 0
    if args.by_snr:
        print(by_snr(args.n, args.draws))
        print(f"\n(took {time.perf_counter() - t0:.0f} s)")
        return 0
    seeds = CALIBRATION_SEEDS if args.on_calibration_seeds else TEST_SEEDS
    print(f"## Rules engine on synthetic spectra (seeds {seeds.start}-{seeds.stop - 1}, 1 positive : "
          f"{NEGATIVE_RATIO} hard negatives, S/N {SNR_RANGE[0]:g}-{SNR_RANGE[1]:g})\n")
    print(synthetic_table(seeds, verbose=args.verbose))
    print("\n## Reliability on the test seeds (held out)\n")
    print(reliability_table(seeds))
    rows = real_rows()
    print("\n## Rules engine on the real files: per task\n")
    print(real_summary(rows))
    print("\n## Rules engine on the real files (p_yes in brackets)\n")
    print(real_table(rows))
    print(f"\n(took {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
