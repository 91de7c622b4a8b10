"""The progress a long run shows: a transient line on stderr (in a notebook, a bar that updates in
place) with what runs now, how many kernels are done of how many, and for how long; notes in yellow.
Where stderr is not a terminal or a notebook (a pipe, a test), only the notes are printed."""

from __future__ import annotations

import sys
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
                    console=on, transient=True, disable=not (on.is_terminal or on.is_jupyter))


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


@contextmanager
def bar(on: Console | None = None):
    """A Bar reporter for the length of the `with`."""
    on = on or console()
    with spinner(BarColumn(), MofNCompleteColumn(), on=on) as progress:
        yield Bar(progress, on)
