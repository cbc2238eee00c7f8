"""`spec-vet info PATH [--target ID] [--json]`: what a survey file holds, as the readers see it."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from ..errors import SpecVettingError
from ..spectrum import Spectrum
from .run_option import command_error


def spectrum_summary(spectrum: Spectrum) -> dict[str, Any]:
    """The JSON object `info --json` prints for one spectrum (keys are a stable interface)."""
    m = spectrum.meta
    return {
        "path": m.path,
        "survey": m.survey,
        "variant": m.variant,
        "n_pixels": len(spectrum),
        "n_good": spectrum.n_good,
        "wavelength_min": float(spectrum.wavelength[0]),
        "wavelength_max": float(spectrum.wavelength[-1]),
        "flux_unit": spectrum.flux_unit,
        "ids": {k: _plain(v) for k, v in m.ids.items()},
        "ra": m.ra,
        "dec": m.dec,
        "pipeline_class": m.pipeline_class,
        "pipeline_subclass": m.pipeline_subclass,
        "redshift": m.redshift,
        "redshift_err": m.redshift_err,
        "redshift_warning": m.redshift_warning,
        "snr": m.snr,
        "snr_bands": dict(m.snr_bands),
        "data_release": m.data_release,
        "pipeline_version": m.pipeline_version,
    }


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return value


def _fmt(value: float | None, spec: str = ".6g") -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)


def _text(s: dict[str, Any]) -> str:
    release = ", ".join(x for x in (s["data_release"], s["pipeline_version"] and f"pipeline {s['pipeline_version']}")
                        if x)
    ids = ", ".join(f"{k}={v}" for k, v in s["ids"].items()) or "-"
    cls = " ".join(x for x in (s["pipeline_class"], s["pipeline_subclass"]) if x) or "-"
    z = _fmt(s["redshift"])
    if s["redshift_err"] is not None:
        z += f" ± {_fmt(s['redshift_err'], '.2g')}"
    if s["redshift_warning"]:
        z += f" (warning flags {s['redshift_warning']})"
    bands = ", ".join(f"{b} {v:.1f}" for b, v in s["snr_bands"].items())
    lines = [
        f"file:      {s['path']}",
        f"survey:    {s['survey']} ({s['variant']}{', ' + release if release else ''})",
        f"pixels:    {s['n_pixels']} ({s['n_good']} good), {s['wavelength_min']:.1f}-{s['wavelength_max']:.1f} Å "
        f"(vacuum), flux unit: {s['flux_unit'] or 'relative (uncalibrated)'}",
        f"ids:       {ids}",
        f"position:  ra {_fmt(s['ra'], '.6f')}, dec {_fmt(s['dec'], '.6f')}",
        f"pipeline:  {cls}, z = {z}",
        f"S/N:       {_fmt(s['snr'], '.1f')} per pixel (median){' [' + bands + ']' if bands else ''}",
    ]
    return "\n".join(lines)


@click.command("info")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--target", "target", default=None, metavar="ID",
              help="DESI TARGETID (or row index for files without FIBERMAP). Default: every usable target.")
@click.option("--redrock", "redrock", default=None, type=click.Path(dir_okay=False),
              help="DESI redrock/zbest file to join (default: redrock-X.fits or zbest-X.fits next to coadd-X.fits).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object, or a list for multi-target files.")
def info(path: str, target: str | None, redrock: str | None, as_json: bool) -> None:
    """Show what a LAMOST, SDSS or DESI spectrum file holds: layout, pixels, wavelength range, identifiers,
    the survey pipeline's class, subclass and redshift, and S/N.

    \b
    A multi-target DESI file without --target lists every usable science target; skipped fibres (sky, stuck,
    bad FIBERSTATUS, no good pixel) are counted on stderr. Bad input exits with status 2 and the reason (1: a read that
    timed out, which a rerun may get past).
    The layout is recognised from the content, never the name (gzip bytes under a .fits name are fine).

    \b
    Examples:
      spec-vet info spec-55862-B6212_sp06-006.fits          LAMOST LRS (DR1 image, DR2+ image, DR8+ table)
      spec-vet info spec-0266-51602-0013.fits --json        SDSS spec / spSpec / SDSS-V, as one JSON object
      spec-vet info coadd-sv3-dark-26065.fits --json        DESI: a JSON list, one object per usable target
      spec-vet info coadd-sv3-dark-26065.fits --target 39627866878511337 --redrock redrock-sv3-dark-26065.fits
    """
    from ..io import iter_spectra, read_spectrum
    from ..io.fits_open import open_fits
    from ..io.registry import identify_reader

    try:
        with open_fits(path) as f:
            multi = identify_reader(f).multi_target
        if target is None and multi:
            summaries: Any = [spectrum_summary(s) for s in iter_spectra(path, redrock=redrock)]
        else:
            summaries = spectrum_summary(read_spectrum(path, target, redrock=redrock))
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    if as_json:
        click.echo(json.dumps(summaries, indent=2))
    elif isinstance(summaries, list):
        if not summaries:
            click.echo(f"{path}: no usable science target")
        click.echo("\n\n".join(_text(s) for s in summaries))
    else:
        click.echo(_text(summaries))
