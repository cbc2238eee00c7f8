"""Engines turn a conversation into the next assistant text. :func:`create_engine` builds one by name.

Imports are lazy: torch is imported only when the ``local`` engine is asked for, httpx only for ``openai``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ConfigError
from ..engine_interface import Engine

#: engine name -> "module:class", resolved on first use
ENGINES: dict[str, str] = {
    "openai": "spec_vetting.engines.openai_http:OpenAIEngine",
    "local": "spec_vetting.engines.local_transformers:LocalEngine",
    "rules": "spec_vetting.engines.rules:RulesEngine",
    "scripted": "spec_vetting.engines.scripted:ScriptedEngine",
}

__all__ = ["ENGINES", "create_engine", "engine_class"]


def engine_class(name: str) -> type[Engine]:
    """The class of engine ``name``; :class:`ConfigError` when unknown or not installed in this version."""
    target = ENGINES.get(name)
    if target is None:
        raise ConfigError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}")
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigError(f"engine {name!r} is not available in this version of spec-vetting "
                              f"({module_name} is missing)") from exc
        extra = " (install the 'local' extra: pip install 'spec-vetting[local]')" if name == "local" else ""
        raise ConfigError(f"engine {name!r} needs the package {exc.name!r}, which is not installed{extra}") from exc
    return getattr(module, attr)


def create_engine(name: str, **options: Any) -> Engine:
    """An engine by name with its options, e.g. ``create_engine("openai", endpoints=[...])``."""
    cls = engine_class(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"engine {name!r}: bad options {sorted(options)} ({exc})") from exc
