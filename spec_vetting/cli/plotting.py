"""The commands that draw pictures stop before their first candidate when the plotting stack is not the trained one."""

from __future__ import annotations

import sys

import click

from ..errors import PlottingEnvironmentError


def require_plotting_environment() -> None:
    """Exit 2 with one line naming what is installed and what is required, unless the pictures can be drawn as
    training drew them (importing the renderer checks matplotlib and its FreeType)."""
    try:
        import spec_vetting.render  # noqa: F401
    except PlottingEnvironmentError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
