"""Logging of the command line: one environment variable, the ``spec_vetting`` logger only.

``SPEC_VETTING_LOG=DEBUG|INFO|WARNING|ERROR|CRITICAL`` (default WARNING) sets the level of the package's own logger
and of the handler that prints it on stderr; the root logger and other libraries' loggers (matplotlib's font
manager, PIL, httpx, ...) are left as they are, so DEBUG does not flood stderr with their lines. Records logged on
Dask workers in other processes come back through ``Client.forward_logging`` (see
:func:`spec_vetting.pipeline.cluster.forward_worker_logs`) and are printed here with the worker's address.
Dask's own logs follow Dask's logging configuration (``DASK_LOGGING__DISTRIBUTED=info``).
"""

from __future__ import annotations

import logging
import os
import sys

ENV = "SPEC_VETTING_LOG"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOGGER = "spec_vetting"


class BadLogLevel(ValueError):
    def __init__(self, raw: str):
        super().__init__(f"{ENV}={raw!r} is not a log level; use one of {', '.join(LEVELS)} (any case)")


def level_from_env(environ=None) -> int | None:
    """The level ``SPEC_VETTING_LOG`` asks for, None when unset or empty; :class:`BadLogLevel` for anything else."""
    raw = (os.environ if environ is None else environ).get(ENV, "")
    name = raw.strip().upper()
    if not name:
        return None
    if name not in LEVELS:
        raise BadLogLevel(raw)
    return logging.getLevelName(name)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (click's test runner swaps it)."""

    def __init__(self):
        super().__init__()

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


class _Formatter(logging.Formatter):
    """The usual line, with ``[worker ADDRESS]`` for a record forwarded from a Dask worker."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        worker = getattr(record, "worker", None)
        return line.replace(f" {record.name}: ", f" [worker {worker}] {record.name}: ", 1) if worker else line


def configure_logging(environ=None) -> int:
    """Attach one stderr handler to the ``spec_vetting`` logger at the level ``SPEC_VETTING_LOG`` gives.

    Idempotent (a second call replaces the handler). With the variable unset the logger's own level is left unset,
    so it follows the root logger (WARNING), and the handler prints WARNING and above. Returns the level.
    """
    level = level_from_env(environ)
    logger = logging.getLogger(LOGGER)
    for h in [h for h in logger.handlers if getattr(h, "_spec_vetting_cli", False)]:
        logger.removeHandler(h)
    handler = _StderrHandler()
    handler._spec_vetting_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.WARNING if level is None else level)
    logger.addHandler(handler)
    if level is not None:
        logger.setLevel(level)
    return logging.WARNING if level is None else level
