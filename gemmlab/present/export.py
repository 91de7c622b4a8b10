"""Rows and documents as files: JSON, CSV, and writes that replace a file whole or not at all."""

from __future__ import annotations

import csv
import io
import json
import re

from ..templates import show_params, show_value


# A list of plain numbers (a row's timing samples, a map of counts): one line, not one line a number.
_NUMBERS = re.compile(r"\[\s+(-?[0-9][0-9.eE+-]*(?:,\s+-?[0-9][0-9.eE+-]*)*)\s+\]")


def dump(doc: dict) -> str:
    """JSON indented for reading, with each list of numbers on one line: a suite's thousands of timing
    samples took a line each, most of a results file."""
    text = json.dumps(doc, indent=2, default=str)
    return _NUMBERS.sub(lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)


def _cell(v) -> str:
    """A CSV cell: parameters as `TILE=32 REG=8`, lists as `x y z`, nothing as empty."""
    if v is None:
        return ""
    if isinstance(v, dict):
        return show_params(v)
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return show_value(v)


def csv_text(rows: list[dict]) -> str:
    """Rows of dicts as CSV, one column per key in the order first seen."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


