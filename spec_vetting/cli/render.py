"""`spec-vet render PATH [--target ID] [--range MIN MAX] [--redshift Z] [--title T] -o OUT.png`: the picture the
model sees for a survey file, full view or one zoom window, in the rest frame as the zoom tool plots it."""

from __future__ import annotations

import sys

import click

from ..errors import RenderError, SpecVettingError, TargetNeededError
from .output_path import make_parents, output_file
from .run_option import command_error


@click.command("render")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", default=None, help="DESI TARGETID (or row number of a trimmed file).")
@click.option(
    "--range",
    "window",
    nargs=2,
    type=float,
    default=None,
    metavar="MIN MAX",
    help="Rest-frame window in Å (the zoom tool's wavelength_range); default: the full view.",
)
@click.option(
    "--redshift",
    type=float,
    default=None,
    help="Redshift for the rest frame; default: the survey pipeline's redshift in the file (none = 0).",
)
@click.option("--title", default="Spectrum", show_default=True, help="Plot title (the trained default is 'Spectrum').")
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False),
    help="PNG file to write (missing folders are created).",
)
def render(path, target, window, redshift, title, output) -> None:
    """Draw the Spec-o3 picture of the spectrum in PATH and write it to OUT.png.

    \b
    Examples:
      spec-vet render spec-55862-B6212_sp06-006.fits -o full.png
      spec-vet render spec-55862-B6212_sp06-006.fits --range 6500 6620 -o ha.png
      spec-vet render coadd-main-dark-10378.fits --target 39627652591521181 --redshift 0.5 -o qso.png
    """
    from ..io import parse_target, read_spectrum
    from .plotting import require_plotting_environment

    require_plotting_environment()
    from ..render import image_tokens, render_spectrum

    if window is not None and not window[0] < window[1]:
        raise click.UsageError(f"--range {window[0]:g} {window[1]:g}: MIN must be smaller than MAX")
    if redshift is not None and not (-1.0 < redshift < 1e3):
        raise click.UsageError(f"--redshift {redshift:g}: a redshift must be above -1 (1 + z > 0)")
    output_file(output)
    try:
        spectrum = read_spectrum(path, target=parse_target(target))
        for warning in spectrum.meta.warnings:
            click.echo(f"warning: {path}: {warning}", err=True)
        rest = spectrum.rest_frame(redshift)
        png = render_spectrum(rest.wavelength, rest.flux, wavelength_range=window, title=title)
    except TargetNeededError as exc:  # which spectrum to draw is the caller's to say: no rerun fixes it
        click.echo(f"error: {exc}; pass --target", err=True)
        sys.exit(2)
    except RenderError as exc:  # the message names the window, not the file
        raise command_error(exc, f"{path}: {exc}") from exc
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    except (ValueError, ArithmeticError) as exc:  # never a raw traceback: say what could not be drawn
        z = spectrum.meta.redshift if redshift is None else redshift
        click.echo(f"error: {path}: cannot draw the spectrum (rest frame z={z}): {exc}", err=True)
        sys.exit(1)
    out = make_parents(output)
    out.write_bytes(png)
    from PIL import Image

    with Image.open(out) as im:
        width, height = im.size
    z = spectrum.meta.redshift if redshift is None else redshift
    click.echo(
        f"{out}: {width}x{height} px, {image_tokens(width, height)} image tokens; "
        f"rest frame z={0.0 if z is None else z:g}; "
        f"{'full view' if window is None else f'window {window[0]:g}-{window[1]:g} Å'}"
    )
