"""Shell completion helpers (click's ``shell_complete``): task keys for ``--task`` and ``tasks show``.

Completion is click's own: ``eval "$(_SPEC_VET_COMPLETE=bash_source spec-vet)"`` in ~/.bashrc (zsh_source,
fish_source for the other shells). Path options complete files because they are ``click.Path``.
"""

from __future__ import annotations

from click.shell_completion import CompletionItem


def complete_task(ctx, param, incomplete: str) -> list[CompletionItem]:
    """Task keys (built-in, and those of ``--tasks-file`` when it is already on the line), with their titles."""
    from ..inspect.tasks import list_tasks

    tasks_file = None
    for c in (ctx, *(_parents(ctx))):
        tasks_file = tasks_file or c.params.get("tasks_file")
    try:
        tasks = list_tasks(tasks_file)
    except Exception:  # a broken or missing tasks file must not break the shell
        tasks = list_tasks(None)
    out = []
    for task in tasks:
        if task.key.startswith(incomplete):
            out.append(CompletionItem(task.key, help=task.class_name))
    return out


def _parents(ctx):
    while ctx.parent is not None:
        ctx = ctx.parent
        yield ctx
