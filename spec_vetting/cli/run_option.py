"""The one `--run` option (alias `--run-id`) of the commands that read a run of a catalog root, and its check.

Every command spells the option the same way and refuses a run the catalog does not hold with exit 1 and a message
naming the run and how to list the runs, before it writes anything.
"""

from __future__ import annotations

import click

RUN_HELP = "run id (default: the latest run under ROOT)"


def run_option(help: str = RUN_HELP):
    """``--run ID`` (``--run-id ID`` the same), into the parameter ``run_id``."""
    return click.option("--run", "--run-id", "run_id", default=None, metavar="ID",
                        help=f"{help}; --run-id is the same option")


def checked_run(root, run_id: str | None) -> str | None:
    """``run_id`` when the catalog under ``root`` holds rows of it; None stays None (each command picks its
    default); a :class:`click.ClickException` (exit 1) naming the unknown run otherwise."""
    if run_id is None:
        return None
    from ..catalog.read import resolve_run_id
    from ..errors import CatalogReadError

    try:
        return resolve_run_id(root, run_id)
    except CatalogReadError as exc:
        raise click.ClickException(str(exc)) from exc


class InputError(click.ClickException):
    """An input no rerun can fix (an unknown candidate, a file naming what is not there): exit 2, like usage."""

    exit_code = 2
