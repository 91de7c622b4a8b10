"""Tables that fit the console.

A console table is a list of Columns, each a header, a function from a row to its cell and a priority.
Printed, it measures its cells against the console's width: long text (params, ideas, errors) is
folded onto more lines, numbers and statuses are never cut, and when even that is too wide the
columns of the highest priority numbers are left out (the caption says which; --wide shows all).
Adding a column to a table is adding one Column to its list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from ..results.records import BAD


def fmt(x, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def speedup_text(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def status_text(r: dict) -> Text:
    return Text(r["status"], style="green" if r["status"] == "PASS" else "bold red" if r["status"] in BAD else "")


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[dict], "str | Text"]  # plain text (never markup) or a styled Text
    priority: int = 0  # 0: always shown; the highest numbers are left out first where the width is short
    justify: str = "right"
    wrap: bool = False  # long text: folded onto more lines (down to its longest word) instead of left out
    when: str | None = None  # shown only where the table is made with this flag (e.g. "speedups")


_MAX_WORD = 24  # a wrapped column is never made narrower than its longest word, up to this


_COMFORT = 30  # nor narrower than this while less important columns can be left out instead


def _text(x) -> Text:
    return x if isinstance(x, Text) else Text("" if x is None else str(x))


def _width(t: Text, words: bool = False) -> int:
    parts = t.plain.split() if words else t.plain.split("\n")
    return max((cell_len(p) for p in parts), default=0)


class FitTable:
    """A rich renderable: a table laid out for the width it is printed at (see Column)."""

    def __init__(self, title: str, columns: list[Column], rows: list[dict], flags: set[str] = frozenset(),
                 row_style: Callable[[dict], str | None] | None = None,
                 end_section: Callable[[int], bool] | None = None, show_lines: bool = False,
                 empty: str | None = None):
        self.title, self.rows, self.show_lines = title, rows, show_lines
        self.columns = [c for c in columns if c.when is None or c.when in flags]
        self.cells = [[_text(c.cell(r)) for c in self.columns] for r in rows]
        if not rows and empty:
            self.cells = [[Text(empty, style="green")] + [Text("")] * (len(self.columns) - 1)]
        self.styles = [row_style(r) if row_style else None for r in rows]
        self.end_section = end_section or (lambda i: False)
        self.natural, self.least = [], []
        for j, c in enumerate(self.columns):
            cells = [row[j] for row in self.cells]
            natural = max([_width(x) for x in cells] + [cell_len(c.header)])
            header_word = max(cell_len(w) for w in c.header.split())
            if c.wrap:
                word = max([_width(x, words=True) for x in cells] + [header_word])
                least = min(natural, max(8, min(word, _MAX_WORD)))
            else:  # never cut: as wide as its widest cell; the header may fold at its spaces
                least = max([_width(x) for x in cells] + [header_word])
            self.natural.append(natural)
            self.least.append(least)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @staticmethod
    def _total(widths) -> int:
        widths = list(widths)
        return sum(widths) + 3 * len(widths) + 1  # a cell of padding each side, a rule between and around

    def layout(self, width: int) -> tuple[list[int], dict[int, int]]:
        """(the columns shown, in order; their content widths) at `width` cells. Until the table fits,
        the least important column goes, or a wrapped one is narrowed from a comfortable width to its
        longest word (which counts as a little less than leaving out the next column in importance);
        then what fits again is undone, the most important step first."""
        cols = self.columns
        comfort = [min(self.natural[j], max(self.least[j], _COMFORT)) if c.wrap else self.least[j]
                   for j, c in enumerate(cols)]
        shown, narrowed = set(range(len(cols))), set()

        def now(j):
            return self.least[j] if j in narrowed else comfort[j]

        steps = [(c.priority, j, "drop") for j, c in enumerate(cols) if c.priority > 0]
        steps += [(c.priority + 1.5, j, "narrow") for j, c in enumerate(cols) if c.wrap]
        done = []
        for step in sorted(steps, key=lambda s: (-s[0], -s[1])):
            if self._total(now(k) for k in shown) <= width:
                break
            (shown.discard if step[2] == "drop" else narrowed.add)(step[1])
            done.append(step)
        for _, j, what in reversed(done):  # undo what the room left allows, the most important first
            if what == "drop" and self._total(now(k) for k in shown | {j}) <= width:
                shown.add(j)
            elif what == "narrow" and j in shown and self._total(
                    comfort[k] if k == j else now(k) for k in shown) <= width:
                narrowed.discard(j)
        shown = sorted(shown)
        widths = {j: now(j) for j in shown}
        spare = width - self._total(widths.values())
        for j in shown:  # first unfold the headers of the columns that are never cut
            if not self.columns[j].wrap and spare > 0:
                add = min(spare, self.natural[j] - widths[j])
                widths[j] += add
                spare -= add
        need = {j: self.natural[j] - widths[j] for j in shown if self.columns[j].wrap}
        if spare > 0 and sum(need.values()) > 0:  # then the wrapped ones, each by its share of what it lacks
            total = sum(need.values())
            if total <= spare:
                for j in need:
                    widths[j] += need[j]
            else:
                given = {j: spare * need[j] // total for j in need}
                left = spare - sum(given.values())
                for j in sorted(need, key=lambda j: -need[j]):
                    if left <= 0:
                        break
                    if given[j] < need[j]:
                        given[j] += 1
                        left -= 1
                for j in need:
                    widths[j] += given[j]
        return shown, widths

    def table(self, width: int) -> Table:
        shown, widths = self.layout(width)
        left_out = [self.columns[j].header for j in range(len(self.columns)) if j not in shown]
        caption = (Text(f"not shown at {width} columns: {', '.join(left_out)} (--wide shows every column)",
                        style="dim") if left_out else None)
        t = Table(title=Text(self.title), title_justify="left", show_lines=self.show_lines,
                  caption=caption, caption_justify="left")
        for j in shown:
            c = self.columns[j]
            t.add_column(Text(c.header), justify=c.justify, width=widths[j], overflow="fold")
        for i, cells in enumerate(self.cells):
            t.add_row(*[cells[j] for j in shown], style=self.styles[i] if i < len(self.styles) else None,
                      end_section=self.end_section(i))
        return t

    def __rich_console__(self, console, options):
        yield self.table(options.max_width)
