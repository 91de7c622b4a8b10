"""A %%gemmlab cell as a template file (write_cell, Cell: the file's lines as the cell's) and whether there
is a GPU to run it on (gpu_missing, needs_gpu).
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from ..errors import GemmlabError
from ..templates import HEADER_RE, NAME_RE, SUFFIX, data_dir
from .display import _say

NO_GPU = "no GPU here: this cell needs an NVIDIA GPU"

# ---- the cell as a template ---------------------------------------------------------------------------

def cells_dir() -> Path:
    """Where cell templates are written: one directory per cell name, so that no other cell (nor an old
    one of another notebook) is in the catalog of a run unless this session defined it."""
    return data_dir() / "cells"


_session: dict[str, Path] = {}  # the cells this Python process has written: name -> its directory


MAGIC_LINES = 1  # the cell's `%%gemmlab ...` line, above the template: the template's line 1 is the cell's 2


@dataclass(frozen=True)
class Cell:
    """A cell written as a template file: the file is the cell's text as it is, so the file's line L is the
    cell's line L + MAGIC_LINES (lines of the cell count its %%gemmlab line, as a notebook numbers them)."""
    name: str
    path: Path

    @property
    def dir(self) -> Path:
        return self.path.parent

    def cell_line(self, file_line: int) -> int:
        return file_line + MAGIC_LINES

    def locate(self, text: str) -> str:
        """Template locations in a message (`<path>:LINE`, absolute or relative) as the cell's lines."""
        if not text:
            return text
        forms = {str(self.path), str(self.path.resolve())}
        try:
            forms.add(os.path.relpath(self.path))
        except ValueError:
            pass
        pattern = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))

        def where(m):
            return "the cell" if m.group(1) is None else f"cell line {self.cell_line(int(m.group(1)))}"
        text = re.sub(rf"(?:{pattern})(?::(\d+))?", where, text)
        # the `gemmlab show ... --kernels-dir <cells>` a compile error suggests: the magic's own
        return re.sub(r"gemmlab show --variant \S+.*?--what source", "%%gemmlab show (in this cell)", text)


def _header(text: str, where: str = "the cell") -> dict:
    """The TOML header of a template's text (for the cell's name: the catalog reads and checks it whole)."""
    m = HEADER_RE.match(text)
    if not m:
        raise GemmlabError(f"{where} is not a template: it starts with a '{{#---' line, then a TOML header "
                           "that ends with '---#}'", hint="docs/notebook.md shows a cell; so does examples/tour.ipynb")
    try:
        return tomllib.loads(m.group(1))
    except tomllib.TOMLDecodeError as e:
        lm = re.search(r"at line (\d+)", str(e))
        at = f"cell line {int(lm.group(1)) + 1 + MAGIC_LINES}" if lm else where
        raise GemmlabError(f"bad template header at {at}: {re.sub(r' [(]at line .*[)]', '', str(e))}") from None


def write_cell(text: str) -> Cell:
    """Write a cell, as it is, as a template file in its own directory under cells_dir(). A `from` in its
    header is the header parser's (gemmlab/templates/inherit.py), as in any template file."""
    text = text if text.endswith("\n") else text + "\n"
    name = _header(text).get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise GemmlabError("the cell's header needs name = \"...\", an identifier (letters, digits, _): the "
                           "template's name, which its runs are recorded under")
    d = cells_dir() / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}{SUFFIX}"
    if not path.exists() or path.read_text() != text:  # unchanged: the compile cache and mtime stay
        path.write_text(text)
    _session[name] = d
    return Cell(name, path)


# ---- the GPU ------------------------------------------------------------------------------------------

def gpu_missing() -> str | None:
    """None when there is a CUDA GPU to run on (or a stand-in GPU side: $GEMMLAB_GPU_JOBS, as the tests
    set it), else why not, in words."""
    from ..worker import GPU_JOBS_ENV
    return None if os.environ.get(GPU_JOBS_ENV) else _no_cuda()


@functools.lru_cache(maxsize=None)
def _no_cuda() -> str | None:
    from ..gpu.driver import cuda
    try:
        cuda()
    except GemmlabError as e:
        return e.message
    return None


def needs_gpu() -> bool:
    """For a notebook's Python cells: True if there is a GPU; else say so (once, in the cell) and False.

        if needs_gpu():
            rs = gemmlab.compare(["naive", "tiled"], shape=2048)
    """
    why = gpu_missing()
    if why:
        _say(f"[yellow]{NO_GPU}[/] [dim]({escape(why)})[/]")
    return why is None
