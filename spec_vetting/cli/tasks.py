"""`spec-vet tasks`: list, show and import the yes/no tasks the model is asked."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import ConfigError
from .complete import complete_task
from .output_path import make_parents, output_file


def _usage_error(exc: ConfigError) -> click.UsageError:
    # a bad task name or tasks file is a usage error: exit code 2 with the message
    return click.UsageError(str(exc))


@click.group()
def tasks() -> None:
    """The tasks (object classes) an inspection can ask about."""


@tasks.command("list")
@click.option("--tasks-file", type=click.Path(dir_okay=False), help="YAML file of extra or overriding tasks.")
def list_cmd(tasks_file: str | None) -> None:
    """Every known task: key, aliases, class name, prompt version.

    \b
    Examples:
      spec-vet tasks list
      spec-vet tasks list --tasks-file tasks.yaml
    """
    from ..inspect.tasks import list_tasks

    try:
        rows = list_tasks(tasks_file)
    except ConfigError as exc:
        raise _usage_error(exc) from exc
    width = max(len(t.key) for t in rows)
    for t in rows:
        alias = f" (alias {', '.join(t.aliases)})" if t.aliases else ""
        click.echo(f"{t.key:<{width}}  {t.class_name}{alias}  [{t.version}]")


@tasks.command("show")
@click.argument("key", shell_complete=complete_task)
@click.option("--tasks-file", type=click.Path(dir_okay=False), help="YAML file of extra or overriding tasks.")
def show_cmd(key: str, tasks_file: str | None) -> None:
    """The full prompt text of one task, as sent after the image and a newline.

    \b
    Examples:
      spec-vet tasks show cv
      spec-vet tasks show mine --tasks-file tasks.yaml
    """
    from ..inspect.tasks import get_task

    try:
        t = get_task(key, tasks_file)
    except ConfigError as exc:
        raise _usage_error(exc) from exc
    click.echo(f"key:        {t.key}")
    click.echo(f"class name: {t.class_name}")
    if t.aliases:
        click.echo(f"aliases:    {', '.join(t.aliases)}")
    click.echo(f"version:    {t.version} ({t.source})")
    click.echo("prompt:")
    click.echo(t.prompt)


@tasks.command("import-specvi")
@click.argument("parquet", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="tasks.yaml", show_default=True,
              help="Tasks YAML to write; tasks already in it are kept unless the import replaces them.")
@click.option("--from-hub", is_flag=True,
              help="Take the files from the Hugging Face hub (Maxwell-Jia/SpecVI-Bench, train split) through the "
                   "hub cache; works offline when the cache holds them. Needs huggingface_hub.")
@click.option("--revision", default=None, help="Hub revision to fetch (a full commit sha pins it; default: main).")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Hub cache folder (default: huggingface_hub's).")
@click.option("--offline", is_flag=True, help="With --from-hub: use the hub cache only, never the network.")
def import_specvi(parquet: tuple[str, ...], output: str, from_hub: bool, revision: str | None,
                  cache_dir: str | None, offline: bool) -> None:
    """Take the exact published prompts from SpecVI-Bench parquet files (one task per data_source).

    Give the files' paths, or --from-hub. Pass the written file with --tasks-file to drive the model with its
    training prompts.

    \b
    Examples:
      spec-vet tasks import-specvi test_cv.parquet -o tasks.yaml
      spec-vet tasks import-specvi --from-hub -o tasks.yaml                     needs network (huggingface_hub)
      spec-vet run --candidates list.csv --task cv --tasks-file tasks.yaml --out catalog/
    """
    from ..inspect.prompts import class_name_from_prompt, specvi_task_prompts
    from ..inspect.tasks import Task, dump_tasks_yaml, get_task, load_tasks_file

    out = Path(output)
    if not parquet and not from_hub:
        raise click.UsageError("give SpecVI-Bench parquet file(s), or --from-hub")
    output_file(out)
    try:
        files = [Path(p) for p in parquet]
        if from_hub:
            from ..io.specvi_hub import SPECVI_REPO, SPECVI_REVISION, fetch_specvi, resolved_revision

            hub_files = fetch_specvi(("train",), revision=revision or SPECVI_REVISION, cache_dir=cache_dir,
                                     local_files_only=offline)
            shas = sorted({resolved_revision(p) or "?" for p in hub_files})
            click.echo(f"{SPECVI_REPO} at commit {', '.join(shas)} ({len(hub_files)} files; pin with --revision)")
            files += hub_files
        prompts: dict[str, tuple[str, str | None]] = {}
        for f in files:
            prompts.update(specvi_task_prompts(f))
        existing = load_tasks_file(out) if out.exists() else []
    except ConfigError as exc:
        raise _usage_error(exc) from exc
    imported = []
    for key, (prompt, system) in sorted(prompts.items()):
        try:
            base = get_task(key)
            aliases, fallback_name = base.aliases, base.class_name
        except ConfigError:
            aliases, fallback_name = (), key
        # the row's own system text is kept (training's template wrote it before the tools block)
        own = {} if system is None else {"system": system}
        imported.append(Task(key=key, class_name=class_name_from_prompt(prompt) or fallback_name, prompt=prompt,
                             aliases=aliases, source="specvi", **own))
    new_keys = {t.key for t in imported}
    merged = [t for t in existing if t.key not in new_keys] + imported
    make_parents(out)
    tmp = out.with_name(out.name + ".tmp")
    try:  # written whole, then renamed: an existing tasks file is never left half-written
        tmp.write_text(dump_tasks_yaml(merged), encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        raise click.UsageError(f"cannot write {out} ({exc.strerror or exc}); pass -o with a writable path") from exc
    for t in imported:
        click.echo(f"{t.key}: {t.class_name} [{t.version}]")
    click.echo(f"wrote {len(merged)} task(s) to {out}; use --tasks-file {out}")
