"""Reading a user's YAML file (job file, tasks file) with errors that name the file and what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError


def read_yaml_file(path: str | Path, what: str) -> Any:
    """The parsed content of ``path``; :class:`ConfigError` naming the file when it is unreadable or not YAML.

    ``what`` names the file's role in the message, e.g. "job file" or "tasks file".
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the {what} is not UTF-8 text ({exc.reason})") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
