"""Sphinx configuration of the spec-vetting documentation (`make docs`: warnings are errors)."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))  # the package of this checkout, not an installed one
sys.path.insert(0, str(DOCS / "_ext"))

from spec_vetting import __version__  # noqa: E402

project = "spec-vetting"
author = "the spec-vetting maintainers"
copyright = "the spec-vetting maintainers"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_click",
    "layer_table",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
root_doc = "index"

# Markdown: `#anchor` links to headings, ::: fences, definition lists
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

html_theme = "furo"
html_title = f"spec-vetting {release}"

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
nitpicky = False
