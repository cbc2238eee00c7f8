"""`spec-vet make-examples DIR`: write the labelled synthetic example set (:mod:`spec_vetting.synthetic.examples`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..synthetic.examples import MARKER, remove_previous_examples, write_examples
from .output_path import output_folder


@click.command("make-examples")
@click.argument("out_dir", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--n", "n", type=click.IntRange(1, 10_000), default=40, show_default=True, help="Number of spectra.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed: the same seed writes the same files.")
@click.option("--gaia", is_flag=True, help="Also write a small synthetic Gaia HATS catalog (DIR/gaia/) and "
              "DIR/candidates-gaia.csv (with ra, dec, mjd) for `spec-vet run --evidence gaia=DIR/gaia`.")
@click.option("--light-curves", "light_curves", is_flag=True, help="Also write a small synthetic ZTF-like "
              "light-curve HATS catalog (DIR/ztf/; implies --gaia, whose list gives the positions) for "
              "`spec-vet run --evidence ztf=DIR/ztf`.")
def make_examples(out_dir: Path, n: int, seed: int, gaia: bool, light_curves: bool) -> None:
    """Write N labelled synthetic survey files (all layouts, 5 tasks) and DIR/candidates.csv.

    Rerunning on the same DIR replaces the set written before (the files listed in DIR/.spec-vet-examples.json);
    a DIR holding a candidates.csv of another origin is refused, so no spectrum of yours is ever deleted.

    \b
    Examples:
      spec-vet make-examples ex/ --n 40 --seed 1
      spec-vet run --candidates ex/candidates.csv --task cv --out catalog/
      spec-vet make-examples ex/ --gaia
      spec-vet run --candidates ex/candidates-gaia.csv --task wd --evidence gaia=ex/gaia --out catalog/
      spec-vet make-examples ex/ --light-curves
      spec-vet run --candidates ex/candidates-gaia.csv --task cv --evidence ztf=ex/ztf --out catalog/
    """
    output_folder(out_dir, "DIR")
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
    if gaia or light_curves:
        from ..synthetic.example_evidence import GAIA_DIR, LIST_NAME, write_example_evidence

        write_example_evidence(out_dir, rows, n, seed)
        click.echo(f"Gaia evidence: catalog {out_dir / GAIA_DIR} (HATS), list {out_dir / LIST_NAME}", file=sys.stdout)
    if light_curves:
        from ..synthetic.example_light_curves import LC_DIR, write_example_light_curves

        write_example_light_curves(out_dir, rows, n, seed)
        click.echo(f"light curves: catalog {out_dir / LC_DIR} (HATS, ZTF DR columns)", file=sys.stdout)
    n_files = len({r["path"] for r in rows})
    yes = sum(r["label"] == "YES" for r in rows)
    click.echo(
        f"wrote {len(rows)} candidates ({yes} YES, {len(rows) - yes} NO) in {n_files} files under {out_dir}; "
        f"list: {out_dir / 'candidates.csv'}; SpecVI-Bench-style rows: {out_dir / 'specvi-synthetic.parquet'}",
        file=sys.stdout,
    )
