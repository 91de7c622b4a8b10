"""A %%gemmlab cell as a template file (write_cell, Cell: the file's lines as the cell's) and whether there
is a GPU to run it on (gpu_missing, needs_gpu).
"""

from __future__ import annotations

import functools
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from .. import api
from ..errors import GemmlabError
from ..templates import HEADER_RE, NAME_RE, SUFFIX, builtin_dir, data_dir
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
    """A cell written as a template file. `shift` is how many lines the file's body lies below the cell's
    (non-zero only with `from`, whose merged header is longer than the cell's); header_lines is the
    file's header (its lines map to no line of the cell when shift is non-zero). Lines of the cell count
    its %%gemmlab line, as a notebook numbers them."""
    name: str
    path: Path
    shift: int = 0
    header_lines: int = 0

    @property
    def dir(self) -> Path:
        return self.path.parent

    def cell_line(self, file_line: int) -> int | None:
        if self.shift and file_line <= self.header_lines:
            return None
        return file_line - self.shift + MAGIC_LINES

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
            if m.group(1) is None:
                return "the cell"
            line = self.cell_line(int(m.group(1)))
            return "the cell's header (with its parent's)" if line is None else f"cell line {line}"
        text = re.sub(rf"(?:{pattern})(?::(\d+))?", where, text)
        # the `gemmlab show ... --kernels-dir <cells>` a compile error suggests: the magic's own
        return re.sub(r"gemmlab show --variant \S+.*?--what source", "%%gemmlab show (in this cell)", text)


def _header(text: str, where: str = "the cell") -> tuple[dict, int]:
    """The TOML header of a template's text, and the line of its closing `---#}`."""
    m = HEADER_RE.match(text)
    if not m:
        raise GemmlabError(f"{where} is not a template: it starts with a '{{#---' line, then a TOML header "
                           "that ends with '---#}'", hint="docs/notebook.md shows a cell; so does examples/tour.ipynb")
    try:
        meta = tomllib.loads(m.group(1))
    except tomllib.TOMLDecodeError as e:
        lm = re.search(r"at line (\d+)", str(e))
        at = f"cell line {int(lm.group(1)) + 1 + MAGIC_LINES}" if lm else where
        raise GemmlabError(f"bad template header at {at}: {re.sub(r' [(]at line .*[)]', '', str(e))}") from None
    return meta, m.group(0).count("\n") + 1


def _toml(value) -> str:
    """One TOML value on one line (inline tables and arrays): what a merged header is written with."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string takes JSON's escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    raise GemmlabError(f"a header value cannot be {value!r}")


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


# What a child does not inherit: these describe the parent against its own parent.
_NOT_INHERITED = ("predict", "predict_x")


def merge_headers(parent: dict, child: dict) -> dict:
    """The header of a cell with `from`: the parent's, with the cell's keys over it. params and launch
    are merged key by key (a parameter the cell declares replaces the parent's whole), constraints
    are added to the parent's, and `parent` defaults to the template the cell starts from."""
    out = {k: v for k, v in parent.items() if k not in _NOT_INHERITED}
    for k, v in child.items():
        if k == "from":
            continue
        if k in ("params", "launch") and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = out[k] | v
        elif k == "constraints" and isinstance(v, list):
            out[k] = list(out.get(k, [])) + v
        else:
            out[k] = v
    if "parent" not in child:
        out["parent"] = child["from"]
    return out


def write_cell(text: str) -> Cell:
    """Write a cell as a template file in its own directory under cells_dir(); with `from`, the header
    merged with the built-in parent's and the body made an {% extends %} of the parent."""
    text = text if text.endswith("\n") else text + "\n"
    meta, end = _header(text)
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise GemmlabError("the cell's header needs name = \"...\", an identifier (letters, digits, _): the "
                           "template's name, which its runs are recorded under")
    shift, header_lines = 0, end
    if "from" in meta:
        parent = _parent(meta["from"], name)
        merged = merge_headers(_header(parent.read_text(), str(parent))[0], meta)
        lines = ["{#---"] + [f"{_key(k)} = {_toml(v)}" for k, v in merged.items()] + ["---#}"]
        body = HEADER_RE.sub("", text, count=1)
        if "{% extends" not in body:  # on the header's closing line: the cell's lines stay where they are
            rel = parent.relative_to(builtin_dir()).as_posix()
            body = f'{{% extends "{rel}" %}}' + body
        header_lines = len(lines)
        shift = header_lines - end
        text = "\n".join(lines) + body
    d = cells_dir() / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}{SUFFIX}"
    if not path.exists() or path.read_text() != text:  # unchanged: the compile cache and mtime stay
        path.write_text(text)
    _session[name] = d
    return Cell(name, path, shift, header_lines)


def _parent(name, child: str) -> Path:
    if not isinstance(name, str):
        raise GemmlabError("from names a built-in template, as a string: from = \"tiled\"")
    if name == child:
        raise GemmlabError(f"a cell that starts from {name} needs a name of its own, not {name!r}")
    v = api.catalog().get(name)
    if not v.builtin:
        raise GemmlabError(f"from = {name!r}: {name} is a template of yours; a cell starts from a built-in one",
                           hint=f"paste {v.path} into the cell instead")
    return v.path


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
