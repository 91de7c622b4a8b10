"""The progress a long run shows: a transient line on stderr (in a notebook, a bar that updates in
place) with what runs now, how many kernels are done of how many, and for how long; notes in yellow.
Where stderr is not a terminal or a notebook (a pipe, a test), only the notes are printed.

In a notebook, rich's own live display needs ipywidgets (without it, a warning and no bar); CellBar
draws the same columns as HTML into one IPython display and updates that display in place instead."""

from __future__ import annotations

import io
import sys
import threading
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


class Reporter:
    """What a long run tells its user while it runs. This one is silent; Bar draws."""

    def total(self, n: int | None) -> None:
        """How many kernels the run will measure (None: not known yet)."""

    def phase(self, text: str) -> None:
        """What runs now (a worker starting, a kernel being timed)."""

    def advance(self) -> None:
        """One more kernel measured."""

    def note(self, text: str) -> None:
        """Something the user should know that is not an error (auto's choice, history not writable)."""


def console(stderr: bool = True) -> Console:
    """A console on today's stderr (or stdout): made at use time, so a test's captured stream is used."""
    return Console(file=sys.stderr if stderr else sys.stdout, highlight=False)


def spinner(*columns, on: Console | None = None) -> Progress:
    """A transient progress line: what runs now, and for how long (and `columns`)."""
    on = on or console()
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), *columns, TimeElapsedColumn(),
                    console=on, transient=True, disable=not on.is_terminal or on.is_jupyter)


class Bar(Reporter):
    """A Reporter that draws: the phase as the description, kernels measured as the bar."""

    def __init__(self, progress: Progress, on: Console):
        self.progress, self.on = progress, on
        self.task = progress.add_task("", total=None)

    def total(self, n):
        self.progress.update(self.task, total=n, completed=0)

    def phase(self, text):
        self.progress.update(self.task, description=escape(text))

    def advance(self):
        self.progress.advance(self.task)

    def note(self, text):
        self.on.print(f"[yellow]note:[/] {escape(text)}", soft_wrap=True)


class CellBar(Bar):
    """A Bar in a notebook: the progress as HTML in one IPython display, redrawn in place on each event
    and twice a second (the spinner, the time), until the `with` ends; then the display is emptied."""

    EVERY_S = 0.5

    def __init__(self, on: Console):
        from IPython.display import display
        quiet = Console(file=io.StringIO())  # the Progress only keeps the tasks: CellBar draws them
        super().__init__(Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(), console=quiet, auto_refresh=False), on)
        self.handle = display({"text/plain": ""}, raw=True, display_id=True)
        self.stop, self.lock = threading.Event(), threading.Lock()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()

    def _tick(self):
        while not self.stop.wait(self.EVERY_S):
            self.draw()

    def draw(self, final: bool = False):
        with self.lock:
            if final:
                self.handle.update({"text/plain": ""}, raw=True)
                return
            page = Console(file=io.StringIO(), record=True, width=120, force_jupyter=False, color_system="truecolor")
            page.print(self.progress.get_renderable())
            self.handle.update({"text/plain": page.export_text(clear=False),
                                "text/html": page.export_html(inline_styles=True, code_format="<pre>{code}</pre>")},
                               raw=True)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=2)
        self.draw(final=True)

    def total(self, n):
        super().total(n)
        self.draw()

    def phase(self, text):
        super().phase(text)
        self.draw()

    def advance(self):
        super().advance()
        self.draw()


@contextmanager
def bar(on: Console | None = None):
    """A Bar reporter for the length of the `with` (in a notebook, a CellBar)."""
    on = on or console()
    if on.is_jupyter:
        cell = CellBar(on)
        try:
            yield cell
        finally:
            cell.close()
        return
    with spinner(BarColumn(), MofNCompleteColumn(), on=on) as progress:
        yield Bar(progress, on)
