"""What gemmlab.run, compare, sweep, suite and scaling return: a ResultSet.

It holds the rows (read-only mappings: a row's fields are listed in docs/api.md), the run's metadata
(device, shape, seed, commit, date) and the gemmlab command line that would measure it again. It shows
itself as the CLI's table in a terminal (rich) and in a notebook (HTML), and turns into plain records:
.to_dicts(), .to_json() (the document --json prints and `gemmlab report` reads), .to_pandas().
"""

from __future__ import annotations

import copy
import io
import shlex
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from rich.console import Console

from ..errors import GemmlabError
from ..results.records import BAD
from . import lab_tables, tables


HTML_WIDTH = 300  # columns of a table in a notebook: every column shows (the cell scrolls sideways)


def _frozen(x):
    if isinstance(x, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return tuple(_frozen(v) for v in x)
    return x


def _thawed(x):
    if isinstance(x, Mapping):
        return {k: _thawed(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return [_thawed(v) for v in x]
    return copy.copy(x)


@dataclass(frozen=True, eq=False)
class ResultSet:
    command: str                 # run, compare, sweep, suite, scaling
    meta: Mapping                # the document without its rows: device, shape, seed, dtype, date, commit, ...
    rows: tuple[Mapping, ...]    # one per kernel (and cuBLAS, last), as the table shows them
    argv: tuple[str, ...] = ()   # the gemmlab command line (without "gemmlab") that measures this again

    @classmethod
    def of(cls, doc: dict, argv: list[str] | tuple[str, ...] = ()) -> "ResultSet":
        """From a run's document (its rows under "rows")."""
        meta = {k: v for k, v in doc.items() if k != "rows"}
        return cls(doc.get("command", ""), _frozen(meta), _frozen(doc.get("rows", [])), tuple(argv))

    # what a caller asks of a run
    @property
    def reproduce(self) -> str:
        """The shell command that measures this again (with the same seed: the same inputs)."""
        return shlex.join(("gemmlab",) + self.argv)

    @property
    def device(self) -> str | None:
        return (self.meta.get("device") or {}).get("name")

    @property
    def failures(self) -> tuple[Mapping, ...]:
        """The rows whose kernel failed its check, crashed, hung or did not build (never timed)."""
        return tuple(r for r in self.rows if r.get("status") in BAD)

    @property
    def interrupted(self) -> bool:
        return bool(self.meta.get("interrupted"))

    @property
    def lead(self) -> bool:
        """Whether this process holds the whole result: no launcher, or rank 0 under one (the other ranks
        handed their rows to it, and their own result says only which rank they are)."""
        return self.meta.get("rank", 0) == 0

    @property
    def exit_status(self) -> int:
        """What the CLI exits with: 130 if interrupted, 1 if any row failed, else 0."""
        return 130 if self.interrupted else 1 if self.failures or self.meta.get("fault") else 0

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    # plain records
    def to_dicts(self) -> list[dict]:
        """The rows as plain dicts (copies: changing them changes nothing here)."""
        return [_thawed(r) for r in self.rows]

    def to_json(self) -> dict:
        """The whole document: metadata and rows, as `--json` prints it and `gemmlab report` reads it."""
        return dict(_thawed(self.meta), rows=self.to_dicts())

    def to_pandas(self):
        """The rows as a pandas DataFrame (needs pandas)."""
        try:
            import pandas
        except ImportError:
            raise GemmlabError("to_pandas() needs pandas, which is not installed",
                               hint="pip install pandas, or use to_dicts()") from None
        return pandas.DataFrame(self.to_dicts())

    # display
    def table(self):
        """The CLI's table for these rows (a rich renderable that fits its console's width)."""
        if self.command == "suite":
            return lab_tables.suite_view(self.to_json())
        if self.command == "scaling":
            return lab_tables.scaling_table(self.to_json())
        if self.command == "dist":
            from .dist_tables import dist_table
            return dist_table(self.to_json())
        if self.meta.get("problem", "gemm") != "gemm":  # transpose, reduce, ...: bandwidth, not FLOP/s
            from .problem_tables import problem_table
            return problem_table(self.to_json(), speedups=self.command == "compare")
        return tables.results_table(self.to_dicts(), tables.title_for(self.to_json()),
                                    speedups=self.command == "compare")

    def __rich__(self):
        return self.table()

    def _repr_html_(self) -> str:
        console = Console(file=io.StringIO(), record=True, width=HTML_WIDTH, force_jupyter=False, color_system="truecolor")
        console.print(self.table())
        return console.export_html(inline_styles=True, code_format="<pre style=\"font-size: 12px\">{code}</pre>")

    def __repr__(self) -> str:
        status = "interrupted" if self.interrupted else f"{len(self.failures)} failed" if self.failures else "all passed"
        return (f"<ResultSet {self.command}: {len(self.rows)} rows on {self.device or '?'}, {status}; "
                f"again: {self.reproduce}>")
