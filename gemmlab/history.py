"""Every run, remembered: one SQLite row per result, written the moment it is measured.

The database lives in the user's data directory (`gemmlab history --where`). `run` and `compare` look
up the last run of the same variant, shape, dtype and device before they record the new one, and show
the change: faster or slower by how much, and whether the template or the parameters changed since
(the source hash is the SHA-256 of the rendered CUDA, so any edit that reaches the compiler shows).

Nothing here needs a GPU.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from .errors import GemmlabError
from .templates import data_dir

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY,
    time        TEXT NOT NULL,     -- UTC, ISO 8601
    command     TEXT NOT NULL,     -- run, compare, ...
    device      TEXT,
    variant     TEXT NOT NULL,
    source_hash TEXT,              -- SHA-256 of the rendered CUDA source (none for cuBLAS)
    template    TEXT,              -- the template file it was rendered from
    params      TEXT NOT NULL,     -- JSON
    M INTEGER NOT NULL, N INTEGER NOT NULL, K INTEGER NOT NULL,
    dtype       TEXT NOT NULL,
    status      TEXT NOT NULL,     -- PASS, FAIL, ERROR, CRASHED, TIMEOUT
    ms          REAL,              -- median, only for a passing check
    tflops      REAL,
    rel_err     REAL,
    error       TEXT,
    commit_id   TEXT
);
CREATE INDEX IF NOT EXISTS runs_key ON runs (variant, M, N, K, dtype, device, id);
"""


def path() -> Path:
    if os.environ.get("GEMMLAB_HISTORY"):
        return Path(os.environ["GEMMLAB_HISTORY"])
    return data_dir() / "history.sqlite"


def _connect(create: bool) -> sqlite3.Connection | None:
    p = path()
    if not create and not p.exists():
        return None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(p, timeout=10)
        con.row_factory = sqlite3.Row
        con.executescript(SCHEMA)
        return con
    except (OSError, sqlite3.Error) as e:
        raise GemmlabError(f"the run history at {p} cannot be used: {e}",
                           hint="move the file away (gemmlab starts a new one), or set GEMMLAB_HISTORY "
                                "to another path") from None


def _as_dict(row: sqlite3.Row) -> dict:
    d = dict(row)
    d["params"] = json.loads(d["params"])
    return d


def record(command: str, row: dict, shape: dict, device: str | None, commit: str | None,
           dtype: str = "fp32") -> dict | None:
    """Store one result row (a report.row dict with `source_hash`); return the previous run of the
    same variant, shape, dtype and device that had a valid time, looked up before this one is added."""
    con = _connect(create=True)
    with closing(con), con:  # one transaction: the row is there whole, or not at all
        key = (row["variant"], shape["M"], shape["N"], shape["K"], dtype, device)
        prev = con.execute("SELECT * FROM runs WHERE variant=? AND M=? AND N=? AND K=? AND dtype=? "
                           "AND device IS ? AND ms IS NOT NULL ORDER BY id DESC LIMIT 1", key).fetchone()
        con.execute(
            "INSERT INTO runs (time, command, device, variant, source_hash, template, params, M, N, K, "
            "dtype, status, ms, tflops, rel_err, error, commit_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), command, device,
             row["variant"], row.get("source_hash"), row.get("source"), json.dumps(row["params"]),
             shape["M"], shape["N"], shape["K"], dtype, row["status"], row["ms"], row["tflops"],
             row["rel_err"], row["error"], commit))
    return _as_dict(prev) if prev else None


def delta(row: dict, prev: dict | None) -> dict:
    """The change from `prev` to `row`: the speed ratio (>1 is faster) and what changed between them."""
    if prev is None:
        return {"vs_last": None, "changed": "first run"}
    changed = []
    if prev["params"] != row["params"]:
        changed.append("params changed")
    elif row.get("source_hash") and prev["source_hash"] and prev["source_hash"] != row["source_hash"]:
        changed.append("template changed")
    speed = prev["ms"] / row["ms"] if row["ms"] else None
    return {"vs_last": speed, "changed": ", ".join(changed), "last_ms": prev["ms"], "last_id": prev["id"]}


def delta_text(d: dict) -> str:
    """'12.3% faster', '4.0% slower', with what changed."""
    speed = d.get("vs_last")
    if speed is None:
        words = "no time" if d.get("last_ms") else ""
    elif abs(speed - 1) < 0.0005:
        words = "same"
    else:
        words = f"{abs(speed - 1) * 100:.1f}% {'faster' if speed > 1 else 'slower'}"
    return ", ".join(w for w in (words, d.get("changed")) if w) or "-"


def measured(device: str, source_hash: str, shape, dtype: str = "fp32") -> dict | None:
    """The last passing run of exactly this kernel (rendered source) on this device and shape."""
    con = _connect(create=False)
    if con is None:
        return None
    with closing(con):
        row = con.execute("SELECT * FROM runs WHERE device IS ? AND source_hash = ? AND M=? AND N=? AND K=? "
                          "AND dtype=? AND status='PASS' ORDER BY id DESC LIMIT 1",
                          (device, source_hash, shape.M, shape.N, shape.K, dtype)).fetchone()
    return _as_dict(row) if row else None


def runs(variant: str | None = None, limit: int = 20) -> list[dict]:
    """The latest `limit` runs, oldest first (of one variant if given)."""
    con = _connect(create=False)
    if con is None:
        return []
    with closing(con):
        try:
            where, args = ("WHERE variant = ?", (variant,)) if variant else ("", ())
            rows = con.execute(f"SELECT * FROM runs {where} ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        except sqlite3.Error as e:
            raise GemmlabError(f"the run history at {path()} cannot be read: {e}") from None
    return [_as_dict(r) for r in reversed(rows)]
