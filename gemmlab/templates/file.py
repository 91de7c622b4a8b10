"""A template file: its name, and where its header sits.

A template is one file `NAME.cu.j2`, or `NN_NAME.cu.j2` where the number only orders it in its folder (the
built-in ones are kernels/fp32/03_tiled.cu.j2 and so on, in ladder order). It starts with its header, TOML
inside a Jinja comment from a `{#---` line to `---#}` (header.py reads it), and the kernel follows as a
Jinja template (render.py).
"""

from __future__ import annotations

import re
from pathlib import Path

SUFFIX = ".cu.j2"
HEADER_RE = re.compile(r"\A\{#---[ \t]*\n(.*?)\n---#\}", re.S)
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a variant's name, a parameter's
ORDER_RE = re.compile(r"^\d+_")


def name_of(path: Path) -> str:
    """The variant a template file holds: NAME for NAME.cu.j2, and for NN_NAME.cu.j2, whose number only
    orders the files of a folder (kernels/fp32/03_tiled.cu.j2 is `tiled`)."""
    stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    return ORDER_RE.sub("", stem)
