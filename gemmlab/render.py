"""Parameters -> CUDA source, plus a map from each rendered line back to its template file and line.

The map comes from a Jinja extension that tags every piece of literal template text with the line it
starts on; after rendering, the tags are read and stripped. So a compiler error on rendered line 40
can be shown as `kernels/fp32/03_tiled.cu.j2:52`, even when loops or macros moved lines around.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError, UndefinedError
from jinja2.ext import Extension
from jinja2.lexer import Token

from .errors import GemmlabError
from .limits import GPC_SLOTS, Limits
from .templates import C_TYPES, HEADER_RE, Variant, builtin_dir, show_params
from .templates.inherit import EXTENDS_RE
from .templates.sandbox import BODY_GLOBALS, Sandbox, sandbox_message

# A tag is "\x1e<file id>:<line>\x1f": control characters that no CUDA source contains.
_TAG_RE = re.compile("\x1e(\\d+):(\\d+)\x1f")
_LEADING_TAGS = re.compile("(?:\\s*\x1e(\\d+):(\\d+)\x1f)+")  # the tags before a line's first visible character
_files: list[str] = []


def _file_id(filename: str) -> int:
    if filename not in _files:
        _files.append(filename)
    return _files.index(filename)


class LineTags(Extension):
    """Tag literal text with its template line: at the start of each data token and after each newline."""

    def filter_stream(self, stream):
        fid = _file_id(stream.filename or stream.name or "<template>")
        for tok in stream:
            if tok.type != "data":
                yield tok
                continue
            line = tok.lineno
            pieces = [f"\x1e{fid}:{line}\x1f"]
            for chunk in tok.value.splitlines(keepends=True):
                pieces.append(chunk)
                if chunk.endswith("\n"):
                    line += 1
                    pieces.append(f"\x1e{fid}:{line}\x1f")
            yield Token(tok.lineno, "data", "".join(pieces))


def _untag(tagged: str) -> tuple[str, list[tuple[str, int] | None]]:
    """Strip the tags; for each output line, the last tag before its first visible character (later tags
    belong to later pieces of the line)."""
    where = []
    for raw in tagged.split("\n"):
        m = _LEADING_TAGS.match(raw)  # (a repeated group keeps its last match: the last leading tag)
        where.append((_files[int(m.group(1))], int(m.group(2))) if m else None)
    return _TAG_RE.sub("", tagged), where


@dataclass
class Rendered:
    """The CUDA source of one variant at one set of parameters."""
    variant: Variant
    params: dict
    source: str
    origins: list[tuple[str, int] | None] = field(repr=False)  # rendered line i+1 -> (file, line)

    @property
    def name(self) -> str:  # the file name NVRTC reports errors against
        return f"{self.variant.name}.cu"

    def template_line(self, rendered_line: int) -> tuple[str, int] | None:
        if 1 <= rendered_line <= len(self.origins):
            return self.origins[rendered_line - 1]
        return None


class FromLoader(FileSystemLoader):
    """The search path's loader, for a template with `from` (templates/inherit.py): `chain` is its file and
    the files it starts from, nearest first. Each file of the chain but the last, unless it has an
    {% extends %} of its own, extends the next, by the name `from:I` (only this loader knows those names,
    and they reach no file but the chain's); the tag goes on the header's closing line, so the file's
    lines stay where they are."""

    def __init__(self, search: list[str], chain: tuple[Path, ...]):
        super().__init__(search)
        self.chain = tuple(Path(p).resolve() for p in chain)

    def get_source(self, environment, template):
        if template.startswith("from:") and template[5:].isdigit() and 0 < int(template[5:]) < len(self.chain):
            path = self.chain[int(template[5:])]
            try:
                source, mtime = path.read_text(), path.stat().st_mtime
            except OSError as e:
                raise TemplateError(f"cannot read {path}: {e}") from None
            filename, uptodate = str(path), lambda: os.path.getmtime(path) == mtime
        else:
            source, filename, uptodate = super().get_source(environment, template)
        here = Path(filename).resolve()
        i = self.chain.index(here) if here in self.chain else len(self.chain)
        m = HEADER_RE.match(source)
        if i + 1 < len(self.chain) and m and not EXTENDS_RE.search(source, m.end()):
            source = source[:m.end()] + f'{{% extends "from:{i + 1}" %}}' + source[m.end():]
        return source, filename, uptodate


_envs: dict[tuple, Environment] = {}


def environment(search: list[Path], limits: Limits, chain: tuple[Path, ...] = ()) -> Environment:
    """One Jinja environment per search path (the variant's own directory, then the built-in pieces in
    kernels/lib and the built-in directory), so `{% import "hopper.j2" %}` of a shared macro file finds a
    copy beside the template before the built-in one, and
    per set of device limits, which are its globals (SMEM_OPTIN, ...: limits.py): the template and every
    file it includes or imports see them. A sandbox (templates/sandbox.py): a template is data, and
    rendering one runs nothing on the host. With `chain` (a template with `from`, and the files it starts
    from), a FromLoader."""
    key = (tuple(str(p) for p in search), limits, tuple(chain))
    if key not in _envs:
        loader = FromLoader(list(key[0]), chain) if chain else FileSystemLoader(list(key[0]))
        env = Sandbox(loader=loader, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      extensions=[LineTags], auto_reload=True)
        env.globals.update(BODY_GLOBALS, ctype=C_TYPES.__getitem__,  # ctype(DTYPE): the input's C type
                           GPC_SLOTS=GPC_SLOTS)  # the GpcOrder argument's slots, as gpc.py packs them
        env.globals.update(limits.names())
        _envs[key] = env
    return _envs[key]


def _template_error_location(err: Exception) -> str:
    """file:line of the innermost template frame in a Jinja runtime error's traceback."""
    tb, where = err.__traceback__, ""
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if fn.endswith(".j2"):
            where = f"{fn}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def render(variant: Variant, params: Mapping[str, object] | None = None) -> Rendered:
    """Render a variant; missing parameters take their defaults, and all are validated first."""
    params = variant.resolve(params)
    search = [variant.path.parent, *(b.parent for b in variant.bases), builtin_dir() / "lib", builtin_dir()]
    chain = (variant.path, *variant.bases) if variant.bases else ()
    env = environment(list(dict.fromkeys(search)), variant.limits, chain)
    names = dict(params)
    names["THREADS"] = variant.threads(params)  # from the header's launch.block: cannot drift
    try:
        template = env.get_template(variant.path.name)
        tagged = template.render(**names)
    except TemplateSyntaxError as e:
        raise GemmlabError(f"template syntax error at {e.filename or variant.path}:{e.lineno}: {e.message}") from None
    except SecurityError as e:
        raise GemmlabError(f"template error at {_template_error_location(e) or variant.path}: {sandbox_message(e)}") from None
    except UndefinedError as e:
        raise GemmlabError(f"template error at {_template_error_location(e) or variant.path}: {e.message}",
                           hint=f"the parameters are: {', '.join(names)}") from None
    except TemplateError as e:
        raise GemmlabError(f"template error at {_template_error_location(e) or variant.path}: {e}") from None
    except (ArithmeticError, TypeError, ValueError) as e:  # 1 // 0, or a range the sandbox caps
        raise GemmlabError(f"template error at {_template_error_location(e) or variant.path}: {e}") from None
    source, origins = _untag(tagged)
    banner = f"// gemmlab variant {variant.name} ({variant.path.name}) {show_params(params)}\n"
    return Rendered(variant, dict(params), banner + source, [None] + origins)

