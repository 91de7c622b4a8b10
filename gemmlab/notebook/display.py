"""What a notebook shows: rich output as HTML (Rich), errors as one line, the SASS highlighter, code of
`show`, and the plots of --plot.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.highlighter import RegexHighlighter
from rich.markup import escape
from rich.syntax import Syntax
from rich.text import Text
from rich.theme import Theme

from ..errors import GemmlabError

# ---- showing things -----------------------------------------------------------------------------------

def _console(stderr: bool = False) -> Console:
    """A console on today's stdout/stderr: in a notebook rich shows what it prints as HTML in the cell."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, highlight=False, width=None if getattr(stream, "isatty", bool)() else 200)


def _say(markup: str, stderr: bool = False) -> None:
    _console(stderr).print(markup, soft_wrap=True)


def _error(e: GemmlabError, cell=None) -> None:
    """One line `error: ...` (and the hint under it), with template locations as the cell's lines (`cell`: a
    cells.Cell, whose locate maps them)."""
    message, hint = (cell.locate(e.message), cell.locate(e.hint)) if cell else (e.message, e.hint)
    _say(f"[bold red]error:[/] {escape(message)}", stderr=True)
    if hint:
        _say(f"[dim]{escape(hint)}[/]", stderr=True)


class Rich:
    """A rich renderable as a notebook shows it (HTML) and as plain text (a terminal, a test)."""

    def __init__(self, renderable, text: str | None = None, theme: Theme | None = None):
        self.renderable, self.text, self.theme = renderable, text, theme

    def _page(self) -> Console:
        page = Console(file=io.StringIO(), record=True, width=200, force_jupyter=False, color_system="truecolor",
                       theme=self.theme)
        page.print(self.renderable)
        return page

    def _repr_html_(self) -> str:
        return self._page().export_html(inline_styles=True, code_format='<pre style="font-size: 12px">{code}</pre>')

    def __repr__(self) -> str:
        return self.text if self.text is not None else self._page().export_text()


class SassHighlighter(RegexHighlighter):
    """SASS as cuobjdump prints it: addresses and encodings dimmed, opcodes bold, memory operations (what
    to look for first: LDG, LDS, STS...) and the math (FFMA, HMMA...) in their own colours."""
    base_style = "sass."
    highlights = [
        r"(?P<comment>/\*[^*]*\*/)",
        r"(?m)^\s*/\*[0-9a-f]+\*/\s+(?P<pred>@!?U?P[T0-9]+\s+)?(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)",
        r"\b(?P<mem>(?:LDG|STG|LDS|STS|LDSM|LDGSTS|LDC|ULDC|LD|ST|ATOMG?|ATOMS|RED|UTMALDG|UBLKCP|SYNCS)(?:\.[A-Z0-9_]+)*)\b",
        r"\b(?P<math>(?:FFMA|FMUL|FADD|HFMA2|HMMA|HGMMA|IMMA|DFMA|IMAD|FMNMX)(?:\.[A-Z0-9_]+)*)\b",
        r"\b(?P<reg>U?R[0-9]+|U?RZ|U?P[0-9T]|SR_[A-Z_.]+)\b",
        r"(?P<const>c\[0x[0-9a-f]+\]\[0x[0-9a-f]+\])",
        r"(?P<label>\.L_x_[0-9]+|Function : \w+)",
    ]


SASS_THEME = Theme({"sass.comment": "grey50", "sass.op": "bold", "sass.pred": "yellow", "sass.mem": "bold magenta",
                    "sass.math": "bold green", "sass.reg": "cyan", "sass.const": "blue", "sass.label": "bold yellow"})


def code(text: str, what: str) -> Rich:
    """The source (CUDA, numbered lines), PTX or SASS (highlighted) of `show`, for the notebook."""
    if what == "sass":
        return Rich(SassHighlighter()(Text(text)), text, SASS_THEME)
    return Rich(Syntax(text, "cuda" if what == "source" else "text", line_numbers=True, word_wrap=False), text)


def _display(obj) -> None:
    from IPython.display import display
    display(obj)


def _show_plot(path: Path | None) -> None:
    if path and Path(path).is_file():
        from IPython.display import Image
        _display(Image(filename=str(path)))


def _plot_argv(argv: list[str]) -> tuple[list[str], Path | None]:
    """`--plot` with no file after it: a new file in a temporary directory (a notebook is run again and
    again, and --plot never overwrites). The plot's path, to show it in the cell after the command."""
    out, path = list(argv), None
    for i, a in enumerate(out):
        if a == "--plot":
            if i + 1 == len(out) or out[i + 1].startswith("-"):
                path = Path(tempfile.mkdtemp(prefix="gemmlab-plot-")) / "plot.png"
                out.insert(i + 1, str(path))
            else:
                path = Path(out[i + 1])
            break
        if a.startswith("--plot="):
            path = Path(a.split("=", 1)[1])
            break
    return out, path
