"""The one `--run` option (alias `--run-id`) of the commands that read a run of a catalog root, and its check.

Every command spells the option the same way and refuses a run the catalog does not hold with exit 2 (no rerun
fixes it) and a message naming the run and how to list the runs, before it writes anything.
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
    default); an :class:`InputError` (exit 2) naming the unknown run otherwise."""
    if run_id is None:
        return None
    from ..catalog.read import resolve_run_id
    from ..errors import CatalogReadError

    try:
        return resolve_run_id(root, run_id)
    except CatalogReadError as exc:
        raise InputError(str(exc)) from exc


class CommandError(click.ClickException):
    """The work could not finish and running the same command again may (after what the message says is fixed):
    exit 1. Shown as ``error: ...``, as every other error line of the CLI."""

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class InputError(CommandError):
    """An input no rerun can fix (an unknown run or candidate, a folder that holds no verdicts, a malformed labels
    or tasks file): exit 2, like usage."""

    exit_code = 2


def command_error(exc: Exception, text: str | None = None) -> CommandError:
    """The CLI's exception for an error of the library, by the one exit-code rule (docs/guide/exit-codes.md):
    what the catalog does not hold and malformed inputs (a list, a labels or tasks file, a spectrum file that is not
    one, a window with no data) are exit 2; the rest (a damaged catalog file, a lost server, a read that timed out
    on a stale mount) 1. ``text``: the message, when not the exception's own."""
    from ..errors import (
        CandidateListError,
        CatalogReadError,
        ConfigError,
        ReadTimeoutError,
        RenderError,
        SpectrumReadError,
    )

    message = str(exc) if text is None else text
    no_rerun_fixes = (CatalogReadError, CandidateListError, ConfigError, SpectrumReadError, RenderError)
    if isinstance(exc, no_rerun_fixes) and not isinstance(exc, ReadTimeoutError):
        return InputError(message)
    return CommandError(message)
