"""Engines turn a conversation into the next assistant text. :func:`create_engine` builds one by name.

Imports are lazy: torch is imported only when the ``local`` engine is asked for, httpx only for ``openai``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..engine_interface import Engine
from ..errors import ConfigError
from ..types import EngineSettings

#: engine name -> "module:class", resolved on first use
ENGINES: dict[str, str] = {
    "openai": "spec_vetting.engines.http.engine:OpenAIEngine",
    "local": "spec_vetting.engines.local.engine:LocalEngine",
    "rules": "spec_vetting.engines.rules.engine:RulesEngine",
    "scripted": "spec_vetting.engines.scripted:ScriptedEngine",
}

__all__ = ["ENGINES", "EngineChoice", "create_engine", "default_engine", "engine_class", "engine_in_flight_slots",
           "engine_options"]


def default_engine(has_endpoints: bool) -> str:
    """The engine used when none is named: the model over HTTP when servers are given, else the rules engine."""
    return "openai" if has_endpoints else "rules"


def engine_class(name: str) -> type[Engine]:
    """The class of engine ``name`` (a registry key, or ``package.module:Class`` for a custom engine);
    :class:`ConfigError` when unknown or not installed in this version."""
    if ":" in name:
        module_name, attr = name.split(":", 1)
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"engine {name!r}: cannot import {attr} from {module_name} ({exc})") from exc
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


@dataclass(frozen=True)
class EngineChoice:
    """An engine resolved once by name: its class, and from it the options, the in-flight cap and the instances a
    run needs (the pipeline passes this value down instead of resolving the name again at each step)."""

    name: str
    cls: type[Engine]

    @classmethod
    def named(cls, name: str) -> EngineChoice:
        """:class:`ConfigError` when ``name`` is unknown or not installed (see :func:`engine_class`)."""
        return cls(name, engine_class(name))

    def options(self, settings: EngineSettings) -> dict[str, Any]:
        """Constructor options from job or command-line settings (the engine decides which)."""
        from_settings = getattr(self.cls, "options_from_settings", None)  # a custom factory may be a plain callable
        return from_settings(settings) if from_settings else dict(settings.options)

    def in_flight_slots(self, options: dict[str, Any]) -> int | None:
        """Requests the engine built with ``options`` can have in flight at once; None when it sets no cap."""
        slots = getattr(self.cls, "in_flight_slots", None)
        return slots(options) if slots else None

    @property
    def drives_model(self) -> bool:
        """Whether the engine is the model (prompts as trained matter), not a stand-in such as the rules engine."""
        return getattr(self.cls, "drives_model", True)

    def create(self, **options: Any) -> Engine:
        try:
            return self.cls(**options)
        except TypeError as exc:
            raise ConfigError(f"engine {self.name!r}: bad options {sorted(options)} ({exc})") from exc


def engine_options(name: str, settings: EngineSettings) -> dict[str, Any]:
    """Constructor options of engine ``name`` from job or command-line settings (the engine decides which)."""
    return EngineChoice.named(name).options(settings)


def engine_in_flight_slots(name: str, options: dict[str, Any]) -> int | None:
    """Requests engine ``name`` built with ``options`` can have in flight at once; None when it sets no cap."""
    return EngineChoice.named(name).in_flight_slots(options)


def create_engine(name: str, **options: Any) -> Engine:
    """An engine by name (or ``package.module:Class``) with its options, e.g. ``create_engine("openai",
    endpoints=[...])``."""
    return EngineChoice.named(name).create(**options)
