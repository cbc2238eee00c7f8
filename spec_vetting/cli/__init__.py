"""`spec-vet`: the command line. Each command lives in its own module and is loaded on first use.

Exit codes, the same for every command (docs/guide/exit-codes.md): 0 done (per-candidate errors are rows, not
failures); 1 the work could not finish and running the same command again may (the message says what to fix
first); 2 usage, configuration, or an input no rerun fixes (an unwritable output path, a missing parent folder that
cannot be created, a folder that is not a catalog root, a run or candidate the catalog does not hold).
"""

from __future__ import annotations

import importlib
import sys

import click

from .. import __version__
from ..errors import PlottingEnvironmentError

#: command name -> "module:attribute"; a module is imported only when its command runs or help is shown
COMMANDS: dict[str, str] = {
    "info": "spec_vetting.cli.info:info",
    "make-examples": "spec_vetting.cli.examples:make_examples",
    "render": "spec_vetting.cli.render:render",
    "tasks": "spec_vetting.cli.tasks:tasks",
    "inspect": "spec_vetting.cli.inspect:inspect_cmd",
    "run": "spec_vetting.cli.run:run",
    "catalog": "spec_vetting.cli.catalog:catalog",
    "endpoints": "spec_vetting.cli.endpoints:endpoints",
    "plan": "spec_vetting.cli.plan:plan",
    "eval": "spec_vetting.cli.evaluate:eval_cmd",
    "bench": "spec_vetting.cli.bench:bench",
    "review-queue": "spec_vetting.cli.review:review_queue",
    "review": "spec_vetting.cli.review:review",
    "report": "spec_vetting.cli.report:report",
    "export": "spec_vetting.cli.export:export",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # command not built in this version
                return None
            raise
        return getattr(module, attr)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PlottingEnvironmentError as exc:  # any command that draws: an install to fix, no rerun helps
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except Exception as exc:
            if isinstance(exc, OSError) and not _undecodable_catalog_file(exc):
                # a path the command did not check up front (they all check their output paths): one line, no
                # traceback
                from .output_path import os_error_line

                line, code = os_error_line(exc)
                click.echo(line, err=True)
                sys.exit(code)
            if not _undecodable_catalog_file(exc):
                raise
            # a catalog file whose frame is whole but whose insides are damaged: the readers leave out the files
            # they can tell are damaged up front (spec_vetting.catalog.damage); this one shows only when decoded
            text = " ".join(str(exc).split())
            click.echo(f"error: a catalog file could not be decoded ({type(exc).__name__}: {text}); run `spec-vet "
                       "catalog check ROOT` to find it and `spec-vet catalog check ROOT --repair` to set it aside",
                       err=True)
            sys.exit(1)


def _undecodable_catalog_file(exc: Exception) -> bool:
    """pyarrow's own errors (ArrowInvalid ...), and the plain OSError it raises for a Parquet file it cannot open
    (no errno: not the operating system's)."""
    pa = sys.modules.get("pyarrow")
    if pa is None:
        return False
    if isinstance(exc, pa.ArrowException):
        return True
    return type(exc) is OSError and exc.errno is None and "Parquet" in str(exc)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="spec-vet")
def main() -> None:
    """Vet rare-object candidates in LAMOST, SDSS and DESI spectra with the Spec-o3 inspection agent.

    \b
    Typical use:
      spec-vet info spec-55862-B6212_sp06-006.fits        what is in a survey file
      spec-vet render FILE --range 6500 6620 -o ha.png    the picture the model sees
      spec-vet inspect FILE --task cv                     one inspection (rules engine, no GPU)
      spec-vet run --candidates list.csv --task cv --out catalog/
      spec-vet eval catalog/                              metrics against labels

    Set SPEC_VETTING_LOG=DEBUG (or INFO, WARNING, ERROR) for spec-vetting's own logs, workers' included.
    """
    from .logs import BadLogLevel, configure_logging

    try:
        configure_logging()
    except BadLogLevel as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
