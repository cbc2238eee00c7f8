"""Tasks: what the model is asked about one spectrum (a class name and the prompt text), with a version id.

Built-in tasks ship in ``builtin_tasks.yaml``; users add or override tasks with a YAML file (``--tasks-file``) of
the same shape, written by hand or by ``spec-vet tasks import-specvi``::

    tasks:
      - key: qso
        class_name: Quasar (QSO)
        aliases: [quasar]          # optional
        prompt: |-
          Analyze the provided spectrum to determine if it is a **Quasar (QSO)**.
          ...

A task from the user's file wins over a built-in task of the same key (that is how SpecVI-Bench prompts replace
the built-in texts).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError
from ..protocol import SYSTEM_PREAMBLE, TASK_ALIASES, TOOLS_BLOCK
from ..yaml_file import read_yaml_file
from .prompts import class_name_from_prompt, prompt_version, strip_image_placeholder

BUILTIN_FILE = "builtin_tasks.yaml"


class Task(BaseModel):
    """One yes/no question about a spectrum. ``prompt`` is the text sent after the image and a newline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(description="short id, e.g. 'cv'; recorded as the task column of every output")
    class_name: str = Field(description="the object class as the prompt names it, e.g. 'White Dwarf'")
    prompt: str = Field(description="task text after the image and one newline")
    version: str = Field("", description="prompt version id; computed from the text when empty")
    aliases: tuple[str, ...] = Field((), description="other keys naming this task (SpecVI-Bench's 'cc')")
    source: str = Field("user", description="builtin | user | specvi | inline")
    system: str = Field(SYSTEM_PREAMBLE, description="the system message's own text; the tools block follows it, "
                        "as training's template appended it (protocol.system_text)")

    @field_validator("key")
    @classmethod
    def _key_ok(cls, v: str) -> str:
        v = v.strip()
        if not v or any(c.isspace() or c in "/=\\" for c in v):
            raise ValueError(f"task key {v!r} must be a non-empty word without spaces, '/', '=' or '\\'")
        return v

    @field_validator("system")
    @classmethod
    def _own_system_text(cls, v: str) -> str:
        # a system text that already ends with the tools block is the same system turn as its own text alone
        return v[: -len(TOOLS_BLOCK)] if v.endswith(TOOLS_BLOCK) else v

    @field_validator("prompt")
    @classmethod
    def _prompt_ok(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("prompt is empty")
        return v

    @model_validator(mode="before")
    @classmethod
    def _default_version(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("version") and isinstance(data.get("prompt"), str):
            system = data.get("system")
            if isinstance(system, str) and system.endswith(TOOLS_BLOCK):
                system = system[: -len(TOOLS_BLOCK)]
            # a system text of its own is part of what the model is asked: it changes the version too
            text = data["prompt"] if system in (None, SYSTEM_PREAMBLE) else f"{system}\x00{data['prompt']}"
            data = {**data, "version": prompt_version(text, data.get("source") or "user")}
        return data

    def with_prompt(self, text: str, *, system: str | None = None, source: str = "inline") -> Task:
        """This task asked with another prompt text (and system text), e.g. a SpecVI-Bench row's own messages.

        ``text`` may still carry the ``<image>`` placeholder of the published data; it is stripped. ``system`` None
        keeps this task's system text.
        """
        prompt = strip_image_placeholder(text, where=f"prompt of task {self.key}")
        system = self.system if system is None else self._own_system_text(system)
        if prompt == self.prompt and system == self.system:
            return self
        return Task(key=self.key, class_name=class_name_from_prompt(prompt) or self.class_name, prompt=prompt,
                    aliases=self.aliases, source=source, system=system)


def _parse_tasks(data: Any, where: str, source: str) -> list[Task]:
    items = data.get("tasks") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError(f"{where}: expected a list of tasks under 'tasks:' (each with key, class_name, prompt)")
    tasks = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ConfigError(f"{where}, task #{i + 1}: expected a mapping with key, class_name and prompt")
        item = dict(item)
        item.setdefault("source", source)
        if isinstance(item.get("prompt"), str):
            item["prompt"] = strip_image_placeholder(item["prompt"], where=f"{where}, task #{i + 1}")
        if "class_name" not in item and isinstance(item.get("prompt"), str):
            name = class_name_from_prompt(item["prompt"])
            if name:
                item["class_name"] = name
        if isinstance(item.get("aliases"), list):
            item["aliases"] = tuple(str(a) for a in item["aliases"])
        try:
            tasks.append(Task(**item))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"{where}, task #{i + 1} ({item.get('key', '?')}): {problems}") from exc
    return tasks


def load_tasks_file(path: str | Path) -> list[Task]:
    """Tasks of a user YAML file; :class:`ConfigError` naming the file and task when it is malformed.

    Parsed once per version of the file (path, size, modification time): planning and exports ask for tasks row by
    row, and an edited file is read again.
    """
    path = Path(path)
    try:
        st = path.stat()
        stamp = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = None  # unreadable: read_yaml_file raises the message
    if stamp is not None and stamp in _TASK_FILES:
        return list(_TASK_FILES[stamp])
    tasks = _parse_tasks(read_yaml_file(path, "tasks file"), str(path), "user")
    if stamp is not None:
        if len(_TASK_FILES) >= _MAX_TASK_FILES:
            _TASK_FILES.pop(next(iter(_TASK_FILES)))
        _TASK_FILES[stamp] = tuple(tasks)
    return tasks


#: parsed tasks files by (path, size, mtime); a handful of files at most per process
_TASK_FILES: dict[tuple, tuple[Task, ...]] = {}
_MAX_TASK_FILES = 8


def dump_tasks_yaml(tasks: list[Task]) -> str:
    """YAML text that :func:`load_tasks_file` reads back to the same tasks (prompts kept byte for byte)."""

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, value: str):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    rows = [
        {"key": t.key, "class_name": t.class_name, "aliases": list(t.aliases), "source": t.source,
         "version": t.version, **({} if t.system == SYSTEM_PREAMBLE else {"system": t.system}), "prompt": t.prompt}
        for t in tasks
    ]
    return yaml.dump({"tasks": rows}, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000)


@lru_cache(maxsize=1)
def builtin_tasks() -> tuple[Task, ...]:
    text = resources.files(__package__).joinpath(BUILTIN_FILE).read_text(encoding="utf-8")
    tasks = _parse_tasks(yaml.safe_load(text), BUILTIN_FILE, "builtin")
    # the built-ins' other names come from the one alias table every layer reads
    return tuple(t.model_copy(update={"aliases": tuple(a for a, k in TASK_ALIASES.items() if k == t.key)})
                 for t in tasks)


def list_tasks(extra_tasks_file: str | Path | None = None) -> list[Task]:
    """Every known task: the user's file first (it overrides built-ins of the same key), then built-ins."""
    user = load_tasks_file(extra_tasks_file) if extra_tasks_file else []
    seen = {t.key for t in user}
    return user + [t for t in builtin_tasks() if t.key not in seen]


def get_task(key: str, extra_tasks_file: str | Path | None = None) -> Task:
    """The task named ``key`` or one of its aliases (case-insensitive); :class:`ConfigError` listing known keys."""
    tasks = list_tasks(extra_tasks_file)
    wanted = str(key).strip().lower()
    for task in tasks:
        if task.key.lower() == wanted or wanted in (a.lower() for a in task.aliases):
            return task
    known = ", ".join(t.key for t in tasks)
    hint = "" if extra_tasks_file else "; define it in a YAML file and pass --tasks-file"
    raise ConfigError(f"unknown task {key!r}: known tasks are {known}{hint}")
