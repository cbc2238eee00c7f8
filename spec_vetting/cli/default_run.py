"""The run a reading command works on when --run is not given: the latest run with verdict rows, said aloud."""

from __future__ import annotations

import click


def pick_run(root, run_id: str | None) -> str | None:
    """``run_id`` when given; else the latest run under ``root`` that has verdict rows, named on stderr with the
    later runs passed over when there are any (which have none). None when no recorded run has rows (the reader
    then says why)."""
    if run_id is not None:
        return run_id
    from pathlib import Path

    from ..catalog.read import latest_run_with_rows

    if not (Path(root) / "verdicts").is_dir():
        return None
    picked, passed_over = latest_run_with_rows(root)
    if picked is None:
        return None
    if passed_over:  # otherwise the latest run itself, which each command's own output names
        click.echo(f"run {picked}: the latest run with verdict rows (later run(s) {', '.join(passed_over)} have none, "
                   "e.g. an incremental run that skipped every pair); pass --run to choose another", err=True)
    return picked
