"""`spec-vet make-examples DIR`: a small labelled set of synthetic survey files and its candidate list.

The set mixes, for each of the five tasks, positives and hard negatives (see ``spec_vetting.fixtures.synthetic``), written
in every supported layout (LAMOST DR1 image, DR7 image gzipped, DR10 table, SDSS spec-lite legacy and BOSS, a DESI
healpix coadd with a stuck and a sky fibre plus its redrock file), and ``DIR/candidates.csv`` with columns
candidate_id, path (relative to DIR), target (DESI TARGETID, else empty), task, label. It also writes
``DIR/specvi-synthetic.parquet``: one positive and one negative per task in the SpecVI-Bench layout.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import zlib
from pathlib import Path

import click

#: task order of the examples (SpecVI-Bench keys)
TASK_ORDER = ("cv", "carbon", "ss", "gm", "wd")
#: the list of files a make-examples run wrote, so that a rerun deletes exactly those and nothing of the user's
MARKER = ".spec-vet-examples.json"
#: layouts cycled through (the DESI ones are gathered into one coadd file)
EXAMPLE_LAYOUTS = ("lamost-lrs-dr1-image", "lamost-lrs-image", "lamost-lrs-coadd-table", "sdss-spec-lite", "desi-coadd")


def plan_examples(n: int, seed: int) -> list[dict]:
    """Which kind, task, label, layout and S/N each example gets (pure: the same for the same n and seed)."""
    import numpy as np

    from ..fixtures.synthetic import TASK_CONFUSERS, TASK_POSITIVES

    rng = np.random.default_rng([seed, 11])
    items = []
    for i in range(n):
        task = TASK_ORDER[i % len(TASK_ORDER)]
        round_ = i // len(TASK_ORDER)
        positive = round_ % 2 == 0
        pool = TASK_POSITIVES[task] if positive else TASK_CONFUSERS[task]
        kind = pool[(round_ // 2) % len(pool)]
        items.append(
            {
                "index": i,
                "task": task,
                "kind": kind,
                "label": "YES" if positive else "NO",
                "layout": EXAMPLE_LAYOUTS[(i + round_) % len(EXAMPLE_LAYOUTS)],
                "snr": float(rng.uniform(12.0, 60.0)),
                "seed": seed * 100_003 + i,
            }
        )
    return items


def _unique(path: Path, used: set[Path]) -> Path:
    candidate, k = path, 1
    while candidate in used or candidate.exists():
        name = path.name
        stem, dot, rest = name.partition(".")
        candidate = path.with_name(f"{stem}-{k}{dot}{rest}")
        k += 1
    used.add(candidate)
    return candidate


def write_examples(out_dir: Path, n: int = 40, seed: int = 0) -> list[dict]:
    """Write the example set under ``out_dir``; returns the candidate rows written to candidates.csv."""
    from ..fixtures.desi import write_desi_coadd
    from ..fixtures.lamost import lamost_file_name
    from ..fixtures.specvi import write_specvi_parquet
    from ..fixtures.synthetic import TASK_CONFUSERS, TASK_POSITIVES, make_spectrum
    from ..fixtures.writers import native_grid, write_spectrum
    from ..io.candidates import fits_stem

    out_dir.mkdir(parents=True, exist_ok=True)
    used: set[Path] = set()
    rows: list[dict] = []
    desi_items: list[tuple[dict, object]] = []
    for item in plan_examples(n, seed):
        layout = item["layout"]
        flavour = "boss" if item["index"] % 2 else "legacy"
        grid = native_grid(layout, flavour=flavour)
        spec = make_spectrum(item["kind"], seed=item["seed"], snr=item["snr"], wavelength=grid)
        ids = spec.meta.ids
        if layout == "desi-coadd":
            desi_items.append((item, spec))
            continue
        if layout == "lamost-lrs-dr1-image":
            rel = Path("lamost") / lamost_file_name(ids)
            options = {}
        elif layout == "lamost-lrs-image":  # as distributed: gzip-compressed
            rel = Path("lamost") / lamost_file_name(ids, ".fits.gz")
            options = {}
        elif layout == "lamost-lrs-coadd-table":  # DR10 downloads are named by OBSID
            rel = Path("lamost") / f"{ids['obsid']}.fits"
            options = {}
        else:
            key = zlib.crc32(f"{item['seed']}".encode())
            sdss_ids = {"plate": 266 + key % 7000, "mjd": 51600 + (key >> 3) % 6000, "fiberid": 1 + (key >> 9) % 640}
            spec = dataclasses.replace(spec, meta=dataclasses.replace(spec.meta, survey="sdss", ids=sdss_ids))
            rel = Path("sdss") / f"spec-{sdss_ids['plate']:04d}-{sdss_ids['mjd']:05d}-{sdss_ids['fiberid']:04d}.fits"
            options = {"flavour": flavour}
        path = _unique(out_dir / rel, used)
        write_spectrum(spec, path, layout, **options)
        rel = path.relative_to(out_dir)
        rows.append({"index": item["index"], "path": rel.as_posix(), "target": "", **_labels(item)})

    for chunk_no, start in enumerate(range(0, len(desi_items), 8)):  # a real coadd holds many targets
        chunk = desi_items[start : start + 8]
        healpix = 26065 + chunk_no
        coadd = _unique(out_dir / "desi" / f"coadd-sv3-dark-{healpix}.fits", used)
        redrock = coadd.with_name(coadd.name.replace("coadd-", "redrock-", 1))
        used.add(redrock)
        tids = write_desi_coadd(
            [s for _, s in chunk], coadd, healpix=healpix, seed=seed + chunk_no, redrock_path=redrock
        )
        for (item, _), tid in zip(chunk, tids, strict=True):
            rows.append(
                {"index": item["index"], "path": coadd.relative_to(out_dir).as_posix(), "target": tid, **_labels(item)}
            )

    rows.sort(key=lambda r: r["index"])
    for r in rows:  # the ids load_candidates would give these files, so both ways of listing them agree
        stem = fits_stem(r["path"])
        r["candidate_id"] = f"{stem}-{r['target']}" if r["target"] != "" else stem
    with open(out_dir / "candidates.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["candidate_id", "path", "target", "task", "label"])
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r[k] for k in writer.fieldnames})

    specvi_rows = []
    for t, task in enumerate(TASK_ORDER):
        for label, kinds in (("YES", "positive"), ("NO", "confuser")):
            kind = (TASK_POSITIVES if kinds == "positive" else TASK_CONFUSERS)[task][0]
            s = make_spectrum(kind, seed=seed * 100_003 + 50_000 + 2 * t + (label == "NO"))
            specvi_rows.append(
                {
                    "task": "cc" if task == "carbon" else task,  # as the published files spell it
                    "label": label,
                    "wavelength": s.wavelength,
                    "flux": s.flux,
                    "redshift": s.meta.redshift if kind in ("qso", "galaxy") else None,
                    "name": lamost_file_name(s.meta.ids, ".fits.gz"),
                    "index": len(specvi_rows),
                }
            )
    write_specvi_parquet(out_dir / "specvi-synthetic.parquet", specvi_rows)
    written = sorted(p.relative_to(out_dir).as_posix() for p in used)
    written += ["candidates.csv", "specvi-synthetic.parquet"]
    (out_dir / MARKER).write_text(json.dumps({"written_by": "spec-vet make-examples", "n": n, "seed": seed,
                                              "files": written}, indent=1) + "\n")
    return rows


def remove_previous_examples(out_dir: Path) -> int:
    """Delete the files an earlier run wrote (listed in DIR/.spec-vet-examples.json), so that a rerun (``make demo``
    twice) rewrites the same set instead of piling up renamed copies. Nothing outside DIR, nothing unlisted."""
    marker = out_dir / MARKER
    root = out_dir.resolve()
    removed = 0
    for rel in json.loads(marker.read_text()).get("files", []):
        target = (out_dir / rel).resolve()
        if root in target.parents and target.is_file():
            target.unlink()
            removed += 1
    marker.unlink()
    return removed


def _labels(item: dict) -> dict:
    return {"task": item["task"], "label": item["label"]}


@click.command("make-examples")
@click.argument("out_dir", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--n", "n", type=click.IntRange(1, 10_000), default=40, show_default=True, help="Number of spectra.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed: the same seed writes the same files.")
def make_examples(out_dir: Path, n: int, seed: int) -> None:
    """Write N labelled synthetic survey files (all layouts, 5 tasks) and DIR/candidates.csv.

    Rerunning on the same DIR replaces the set written before (the files listed in DIR/.spec-vet-examples.json);
    a DIR holding a candidates.csv of another origin is refused, so no spectrum of yours is ever deleted.
    """
    if (out_dir / MARKER).is_file():
        remove_previous_examples(out_dir)
    elif (out_dir / "candidates.csv").exists():
        # a candidate list that make-examples did not write may list the user's own spectra: never touch them
        raise click.BadParameter(
            f"{out_dir / 'candidates.csv'} exists but was not written by make-examples (no {MARKER} beside it); "
            "choose a new or empty folder, or delete that file if it is an old example set",
            param_hint="DIR",
        )
    try:
        rows = write_examples(out_dir, n=n, seed=seed)
    except OSError as exc:
        raise click.ClickException(
            f"cannot write the examples under {out_dir}: {exc.strerror or exc} ({exc.filename or out_dir})"
        ) from None
    n_files = len({r["path"] for r in rows})
    yes = sum(r["label"] == "YES" for r in rows)
    click.echo(
        f"wrote {len(rows)} candidates ({yes} YES, {len(rows) - yes} NO) in {n_files} files under {out_dir}; "
        f"list: {out_dir / 'candidates.csv'}; SpecVI-Bench-style rows: {out_dir / 'specvi-synthetic.parquet'}",
        file=sys.stdout,
    )
