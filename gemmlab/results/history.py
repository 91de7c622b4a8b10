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
import statistics
from contextlib import closing
from pathlib import Path

from ..errors import GemmlabError
from ..templates import data_dir

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
    commit_id   TEXT,
    samples     TEXT               -- JSON: every timed repetition, ms (the noise of a comparison)
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
        if "samples" not in {c["name"] for c in con.execute("PRAGMA table_info(runs)")}:
            con.execute("ALTER TABLE runs ADD COLUMN samples TEXT")  # a history from before samples were kept
        return con
    except (OSError, sqlite3.Error) as e:
        raise GemmlabError(f"the run history at {p} cannot be used: {e}",
                           hint="move the file away (gemmlab starts a new one), or set GEMMLAB_HISTORY "
                                "to another path") from None


def _as_dict(row: sqlite3.Row) -> dict:
    d = dict(row)
    d["params"] = json.loads(d["params"])
    d["samples"] = json.loads(d["samples"]) if d.get("samples") else None
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
            "dtype, status, ms, tflops, rel_err, error, commit_id, samples) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), command, device,
             row["variant"], row.get("source_hash"), row.get("source"), json.dumps(row["params"]),
             shape["M"], shape["N"], shape["K"], dtype, row["status"], row["ms"], row["tflops"],
             row["rel_err"], row["error"], commit,
             json.dumps(row["samples_ms"]) if row.get("samples_ms") else None))
    return _as_dict(prev) if prev else None


def noise(samples: list[float] | None) -> float | None:
    """A run's noise, relative to its median: the spread of its repetitions as a standard deviation,
    estimated robustly (1.4826 x the median absolute deviation), so one slow repetition does not count
    as noise. None without at least 3 samples."""
    if not samples or len(samples) < 3:
        return None
    med = statistics.median(samples)
    mad = statistics.median(abs(x - med) for x in samples)
    return 1.4826 * mad / med if med > 0 else None


def delta(row: dict, prev: dict | None) -> dict:
    """The change from `prev` to `row`: the speed ratio (>1 is faster), whether it is outside the noise,
    and what changed between them. As nvbench's compare does, a difference counts only if it is larger
    than the noise of the runs (here the larger of the two, from their samples); `outside` is None
    where either run kept no samples."""
    if prev is None:
        return {"vs_last": None, "changed": "first run"}
    changed = []
    if prev["params"] != row["params"]:
        changed.append("params changed")
    elif row.get("source_hash") and prev["source_hash"] and prev["source_hash"] != row["source_hash"]:
        changed.append("template changed")
    speed = prev["ms"] / row["ms"] if row["ms"] else None
    a, b = noise(prev.get("samples")), noise(row.get("samples_ms"))
    band = max(a, b) if a is not None and b is not None else None
    outside = abs(speed - 1) > band if speed is not None and band is not None else None
    return {"vs_last": speed, "noise": band, "outside_noise": outside, "changed": ", ".join(changed),
            "last_ms": prev["ms"], "last_id": prev["id"]}


def delta_text(d: dict) -> str:
    """'2.1% faster', or '0.4% (within noise)', with what changed."""
    speed = d.get("vs_last")
    if speed is None:
        words = "no time" if d.get("last_ms") else ""
    else:
        words = f"{abs(speed - 1) * 100:.1f}%"
        if d.get("outside_noise") is False:
            words += " (within noise)"
        else:
            words += " faster" if speed > 1 else " slower"
            if d.get("outside_noise") is None:
                words += " (noise unknown)"
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
