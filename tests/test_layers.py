"""The layer table (docs/maintainers/architecture.md, generated from RANKS below), checked on the source: imports
point down only.

Every top-level part of the package has a rank; a module may import its own part or a part of lower rank. Parts
that share a rank are peers and must not import each other (the inspection loop and the engines both stand on the
vocabulary and meet only through it). Imports under ``if TYPE_CHECKING:`` are annotations, not dependencies, and
are not counted. A part missing from the table fails the test, so a new package has to be placed deliberately.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spec_vetting"

#: part of the package -> rank (higher may import lower); the comments name the layers. docs/maintainers/architecture.md
#: renders this table (its build fails when a part here has no description there)
RANKS: dict[str, int] = {
    # vocabulary
    "__init__": 0, "errors": 0, "types": 0, "protocol": 0, "lines": 0, "chat_stream": 1,
    "engine_interface": 1, "yaml_file": 1, "label_values": 1, "answers": 1,
    # spectra
    "spectrum": 2, "io": 3,
    # rendering; evidence beyond the spectrum (cross-matches, M_G): peers above the spectra, below the engines
    "render": 4, "evidence": 4,
    # synthetic survey files for examples and tests, beside the readers
    "synthetic": 5,
    # inspection and engines: peers on the vocabulary
    "inspect": 6, "engines": 6,
    # the catalog, and the analysis of what it holds
    "catalog": 7,
    "analysis": 8,
    "report": 9,
    # pipeline, command line
    "pipeline": 10,
    "cli": 11, "__main__": 12,
}


def _part(module: str) -> str:
    """'spec_vetting.io.lamost' -> 'io'; the package itself -> '__init__'."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    pieces = list(rel.parts)
    if pieces[-1] == "__init__":
        pieces = pieces[:-1]
    return ".".join(pieces)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST):
    """Import nodes outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def package_imports(path: Path) -> set[str]:
    """The spec_vetting modules ``path`` imports at run time (relative imports resolved)."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "spec_vetting")
            continue
        if node.level:
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target.split(".")[0] != "spec_vetting":
            continue
        if target == "spec_vetting" and not node.module:
            # "from .. import protocol" names a module; "from .. import __version__" the package's own attribute
            for alias in node.names:
                is_module = (PACKAGE / f"{alias.name}.py").exists() or (PACKAGE / alias.name).is_dir()
                found.add(f"spec_vetting.{alias.name}" if is_module else "spec_vetting")
        else:
            found.add(target)
    return found


def _violations() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        own = _part(module)
        if own not in RANKS:
            problems.append(f"{module}: part {own!r} has no layer in RANKS (rank it here and describe it in "
                            "docs/maintainers/architecture.md)")
            continue
        for target in sorted(package_imports(path)):
            other = _part(target)
            if other == own:
                continue
            if other not in RANKS:
                problems.append(f"{module} imports {target}: part {other!r} has no layer")
            elif RANKS[other] > RANKS[own]:
                problems.append(f"{module} (rank {RANKS[own]}) imports {target} (rank {RANKS[other]}): upward")
            elif RANKS[other] == RANKS[own]:
                problems.append(f"{module} imports its peer {target}: parts of one rank do not import each other")
    return problems


def test_imports_point_down_only():
    problems = _violations()
    assert not problems, "layer violations:\n" + "\n".join(problems)


@pytest.mark.parametrize("source, expected", [
    ("from ..inspect.loop import run\n", {"spec_vetting.inspect.loop"}),
    ("from .. import protocol\n", {"spec_vetting.protocol"}),
    ("from .. import __version__\n", {"spec_vetting"}),
    ("import spec_vetting.render\n", {"spec_vetting.render"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..pipeline import x\n", set()),
    ("def f():\n    from ..cli import main\n", {"spec_vetting.cli"}),
])
def test_import_scan_sees_relative_lazy_and_skips_type_checking(tmp_path, monkeypatch, source, expected):
    fake = tmp_path / "spec_vetting" / "engines"
    fake.mkdir(parents=True)
    (fake / "mod.py").write_text(source)
    (tmp_path / "spec_vetting" / "protocol.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "spec_vetting")
    assert package_imports(fake / "mod.py") == expected


def test_an_upward_import_is_reported(tmp_path, monkeypatch):
    pkg = tmp_path / "spec_vetting"
    (pkg / "io").mkdir(parents=True)
    (pkg / "io" / "bad.py").write_text("from ..pipeline.runner import run_job\n")
    (pkg / "inspect").mkdir()
    (pkg / "inspect" / "peer.py").write_text("from ..engines import create_engine\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    problems = _violations()
    assert any("spec_vetting.io.bad" in p and "upward" in p for p in problems)
    assert any("spec_vetting.inspect.peer" in p and "peer" in p for p in problems)
