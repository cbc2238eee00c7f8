"""Damaged catalog files as the reader commands report them: one line each on stderr, then what to do."""

from __future__ import annotations

import click


def warn_damaged(root) -> list:
    """Name every damaged file under ``root`` on stderr (the reading goes on without them); returns them."""
    from ..catalog.check import rows_not_counted
    from ..catalog.damage import REPAIR_HINT, damage_report, damaged_files, damaged_records

    for record in damaged_records(root):
        click.echo(f"warning: {record.line()}; {REPAIR_HINT.format(root=root)}", err=True)
    damaged = damaged_files(root)
    if not damaged:
        return []
    for line in damage_report(root, damaged):
        click.echo(f"warning: {line}", err=True)
    for (run_id, task), n in sorted(rows_not_counted(root, damaged).items()):
        click.echo(f"warning: {n} verdict row(s) of run {run_id}, task {task} could not be counted", err=True)
    return damaged
